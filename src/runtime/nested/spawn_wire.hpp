// The wire of the tree's spawn service (nested processes on a cluster backend): a child that
// starts children of its own asks the top master, through each master above it, to start them
// with the top master's backend, and hears back when each is identified, runs and ends
// (docs/design.md, "Nested processes").
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backend/backend.hpp"
#include "backend/engine_run.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail::spawn_wire {

/// The service id every master of a tree answers these kinds on (no channel or service is 0:
/// channel ids count from 1, and channel 0 is only read, never served as a service).
inline constexpr std::uint64_t service_id = 0;

// Up, from the asker towards the top; `request` is the asker's own number for the child.
inline constexpr kind start = service_kind<service_block::spawn, 0>();         // payload: encode(spec, parent)
inline constexpr kind signal = service_kind<service_block::spawn, 1>();        // aux: the signal
inline constexpr kind expect_exit = service_kind<service_block::spawn, 2>();   // the child said done
inline constexpr kind reported_pid = service_kind<service_block::spawn, 3>();  // aux: the pid it reported
// Down, flagged a reply: what became of the child `request`; aux: an event, payload: encode(news).
inline constexpr kind news = service_kind<service_block::spawn, 4>();

enum class event : std::uint32_t { identified = 1, running = 2, exited = 3 };

/// What the top master learned of a child.
struct child_news {
  int pid = 0;
  int code = 0;             // exited: >= 0 its exit code, -N killed by signal N
  std::string detail{};     // exited: the backend's exit_detail, or why it could not start
  bool never_fits = false;  // exited: no node can ever run it (errc::unsatisfiable at start)
  std::optional<memory_stop> memory{};  // exited: stopped for going past its memory limit
};

/// A spec and the handle of the process that asks (0: a child of the top master itself).
std::string encode(const spawn_spec& spec, std::uint64_t parent);
/// Throws fiber::error(protocol_error) naming what is wrong.
spawn_spec decode_spec(std::string_view text, std::uint64_t& parent);
std::string encode(const child_news& told);
child_news decode_news(std::string_view text);

}  // namespace fiber::detail::spawn_wire
