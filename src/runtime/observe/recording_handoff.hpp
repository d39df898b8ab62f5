// A master in a Kubernetes pod hands its run's recording to the `fiber run` that follows it: the
// pod's files go with the pod, and the recorder is there for after the run (fiber history, fiber
// trace). At its end the master serves the file once, on a port of its pod, to whoever has the
// token `fiber run` gave it (in the file FIBER_INTERNAL_RECORD_HANDOFF_FILE), and says so in its output, which `fiber run`
// reads; `fiber run` takes it through the API server's pod proxy into this host's record_dir.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace fiber::detail {

/// The file holding the token of the `fiber run` that waits for the recording (a Secret mounted
/// in the master's pod); unset: none waits.
inline constexpr const char* env_record_handoff_file = "FIBER_INTERNAL_RECORD_HANDOFF_FILE";

/// What the master prints, and what `fiber run` reads from it.
struct handoff_offer {
  std::string file;  // the recording's file name (its folder is the taker's record_dir)
  std::uint64_t bytes = 0;  // its size: the answer ends when its connection does, so the taker checks
  std::uint16_t port = 0;
};
std::string handoff_line(const handoff_offer& offer);
std::optional<handoff_offer> handoff_in_line(std::string_view line);

/// Serves the recording at `path` once (GET /recording?token=TOKEN, on every address), says where
/// through `announce` (the master: its handoff_line on stderr), and returns once it was taken
/// whole, or after `patience`: whether it was taken.
bool hand_off_recording(const std::string& path, const std::string& token, std::chrono::milliseconds patience,
                        const std::function<void(const handoff_offer&)>& announce);

}  // namespace fiber::detail
