// Where a run's trace goes, whatever its format: groups of tracks (a pool, the program), tracks
// (a worker, a child), and on them spans, marks, counters and the arrows between them. The
// builder (core/trace_builder.hpp) says what a recording shows; a sink says it in one format:
// Chrome's JSON (core/chrome_trace_writer.hpp) or Perfetto's protobuf
// (core/perfetto_trace_writer.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <variant>

namespace fiber::detail {

/// One named value of an event: a number, a real or a text.
struct trace_arg {
  std::string_view key;
  std::variant<std::int64_t, double, std::string_view> value;
};
/// An event's values, borrowed for the call: a braced list, or an array's first `n`.
class trace_args {
 public:
  trace_args() = default;
  trace_args(std::initializer_list<trace_arg> list) : list_(list) {}
  trace_args(const trace_arg* first, std::size_t n) : first_(first), size_(n) {}
  const trace_arg* begin() const { return first_ ? first_ : list_.begin(); }
  const trace_arg* end() const { return first_ ? first_ + size_ : list_.end(); }
  std::size_t size() const { return first_ ? size_ : list_.size(); }

 private:
  std::initializer_list<trace_arg> list_;
  const trace_arg* first_ = nullptr;
  std::size_t size_ = 0;
};

class trace_sink {
 public:
  virtual ~trace_sink() = default;
  /// A group of tracks, shown as `name` in `order` among the groups. Chrome's format shows a
  /// number after a group's name (a process id): `number` where it is free, else one of its own.
  virtual void group(int group, std::string_view name, std::int64_t number, int order) = 0;
  /// A track of `group`, named; `number` as for a group (a thread id in Chrome's format). Track 0
  /// is the group's own (its master's): Perfetto's format draws it on the group's row.
  virtual void track(int group, std::uint32_t track, std::string_view name, std::int64_t number) = 0;
  /// A span on a track; spans on one track nest or follow each other. `flow_in`, when not 0, ends
  /// at its start the arrow that flow_from began.
  virtual void span(int group, std::uint32_t track, std::string_view name, std::uint64_t from_ns, std::uint64_t to_ns,
                    trace_args args, std::uint64_t flow_in = 0) = 0;
  /// A moment on a track.
  virtual void mark(int group, std::uint32_t track, std::string_view name, std::uint64_t ns, trace_args args) = 0;
  /// Begins arrow `id` on a track at `ns` (a task's sending), to the span that takes it in.
  virtual void flow_from(int group, std::uint32_t track, std::uint64_t ns, std::uint64_t id) = 0;
  /// A counter of `group`, `series` of `name` (a worker's "resident MB"), `value` from `ns` on.
  virtual void counter(int group, std::string_view name, std::string_view series, std::uint64_t ns, double value) = 0;
  /// Ends the trace; throws fiber::error when it could not be written in full.
  virtual void close() = 0;
};

}  // namespace fiber::detail
