// `fiber run --attach` on Kubernetes: takes the recording its master offers at its end
// (runtime/observe/recording_handoff) through the API server's pod proxy, into this host's record_dir,
// where `fiber history` and `fiber trace` find it after the pod is gone.
#pragma once
#include <asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "fiber/detail/unique_function.hpp"
#include "transport/http_client.hpp"

namespace fiber::cli {

class recording_taker {
 public:
  /// Prepares a request to `target` on `port` of the master's pod.
  using route_fn = std::function<void(detail::http_request&, std::uint16_t port, const std::string& target)>;

  /// `token`: the one the master was given (in the run's Secret, cli/run_tokens); `folder`: where it goes.
  recording_taker(asio::io_context& io, std::string token, std::string folder);

  /// A line of the master's output: when it offers the recording, starts taking it and returns
  /// true; `done` runs once it is kept here or could not be (either is said on stderr).
  bool take_if_offered(std::string_view line, const route_fn& route, detail::unique_function<void()> done);

 private:
  detail::http_client http_;
  std::string token_, folder_;
};

}  // namespace fiber::cli
