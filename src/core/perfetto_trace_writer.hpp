// Perfetto's own trace format (protobuf TracePackets of TrackEvents), what `fiber trace --format
// perfetto` writes: a group is a track at the top with its tracks under it, in the order made, and
// its own events drawn on its row. Small by construction: each track's events are a packet
// sequence of its own whose defaults name the track (no track in each event); names of events and
// of their arguments are interned per sequence (sent once, then a number); times are the
// recording's, from the run's start (no clock snapshot: the UI would show a "System" group for it
// above the run); a span is a begin and an end, an arrow a flow id, a counter a counter track of
// its group.
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
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
  /// One track's packets: what it interned.
  struct sequence {
    std::unordered_map<std::string, std::uint64_t> names, arg_names;
  };
  struct interned {
    std::uint64_t iid;
    bool is_new;
  };
  std::uint64_t group_uuid(int group);
  std::uint64_t track_uuid(int group, std::uint32_t track);
  void describe(std::uint64_t uuid, std::uint64_t parent, std::string_view name, bool counter);
  sequence& sequence_of(std::uint64_t uuid);
  static interned intern(std::unordered_map<std::string, std::uint64_t>& table, std::string_view s);
  /// One TracePacket holding a TrackEvent on track `uuid` at `ns`, the names it is the first to
  /// use on that track interned in it.
  void event(std::uint64_t ns, int type, std::uint64_t uuid, std::string_view name, trace_args args,
             std::uint64_t flow_out, std::uint64_t flow_in, const double* value = nullptr);
  void flush(bool all);

  std::ofstream out_;
  std::string buf_;
  std::uint64_t next_uuid_ = 1;
  std::map<int, std::uint64_t> groups_;
  std::map<std::pair<int, std::uint32_t>, std::uint64_t> tracks_;
  std::map<std::pair<int, std::string>, std::uint64_t> counters_;
  std::map<std::uint64_t, int> next_rank_;  // parent -> the rank its next child gets
  std::unordered_map<std::uint64_t, std::unique_ptr<sequence>> sequences_;  // by track uuid
};

}  // namespace fiber::detail
