// Perfetto's own trace format (protobuf TracePackets of TrackEvents), what `fiber trace --format
// perfetto` writes: a group is a track at the top with its tracks under it, in the order made;
// names of events and of their arguments are interned (sent once, then a number); a span is a
// begin and an end; an arrow is a flow id; a counter is a counter track of its group. Smaller
// than Chrome's JSON and read by Perfetto's native importer, which needs no strict nesting.
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/trace_sink.hpp"

namespace fiber::detail {

class perfetto_trace_writer final : public trace_sink {
 public:
  /// Throws fiber::error (config_error) when `path` cannot be written.
  explicit perfetto_trace_writer(const std::string& path);
  void group(int group, std::string_view name, std::int64_t number, int order) override;
  void track(int group, std::uint32_t track, std::string_view name, std::int64_t number) override;
  void span(int group, std::uint32_t track, std::string_view name, std::uint64_t from_ns, std::uint64_t to_ns,
            trace_args args, std::uint64_t flow_in) override;
  void mark(int group, std::uint32_t track, std::string_view name, std::uint64_t ns, trace_args args) override;
  void flow_from(int group, std::uint32_t track, std::uint64_t ns, std::uint64_t id) override;
  void counter(int group, std::string_view name, std::string_view series, std::uint64_t ns, double value) override;
  void close() override;

 private:
  struct interned {
    std::uint64_t iid;
    bool is_new;
  };
  std::uint64_t group_uuid(int group);
  std::uint64_t track_uuid(int group, std::uint32_t track);
  void describe(std::uint64_t uuid, std::uint64_t parent, std::string_view name, bool counter);
  interned intern(std::unordered_map<std::string, std::uint64_t>& table, std::string_view s);
  /// One TracePacket holding a TrackEvent at `ns` (names interned in it where new), written to
  /// the file's buffer.
  void event(std::uint64_t ns, int type, std::uint64_t track, std::string_view name, trace_args args,
             std::uint64_t flow_out, std::uint64_t flow_in, const double* value = nullptr);
  void packet_done(std::size_t at);
  void flush(bool all);

  std::ofstream out_;
  std::string buf_, scratch_;
  bool first_packet_ = true;
  std::uint64_t next_uuid_ = 1;
  std::map<int, std::uint64_t> groups_;
  std::map<std::pair<int, std::uint32_t>, std::uint64_t> tracks_;
  std::map<std::pair<int, std::string>, std::uint64_t> counters_;
  std::map<std::uint64_t, int> next_rank_;  // parent -> the rank its next child gets
  std::unordered_map<std::string, std::uint64_t> names_, arg_names_;
};

}  // namespace fiber::detail
