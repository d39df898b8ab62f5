#include "core/perfetto_trace_writer.hpp"

#include "core/proto_out.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
// Field numbers of Perfetto's protos (protos/perfetto/trace/...): Trace, TracePacket,
// TrackDescriptor, TrackEvent, InternedData, DebugAnnotation.
enum : std::uint32_t {
  trace_packet = 1,
  packet_timestamp = 8,
  packet_sequence_id = 10,
  packet_track_event = 11,
  packet_interned_data = 12,
  packet_sequence_flags = 13,
  packet_defaults = 59,
  packet_track_descriptor = 60,
  defaults_track_event = 11,
  track_event_defaults_track = 11,
  track_uuid_field = 1,
  track_name = 2,
  track_counter = 8,
  track_parent = 5,
  track_child_ordering = 11,
  track_sibling_rank = 12,
  event_debug_annotation = 4,
  event_type = 9,
  event_name_iid = 10,
  event_counter_value = 30,
  event_double_counter_value = 44,
  // The varint forms of flow ids (flow_ids_old, terminating_flow_ids_old): a few bytes where the
  // fixed64 ones take eight; the trace processor reads both. Ids here are small and unique in
  // the file, which the fixed64 forms exist to avoid needing.
  event_flow_ids = 36,
  event_terminating_flow_ids = 42,
  interned_event_names = 2,
  interned_annotation_names = 3,
  interned_iid = 1,
  interned_name = 2,
  annotation_name_iid = 1,
  annotation_int = 4,
  annotation_double = 5,
  annotation_string = 6,
};
enum : int { slice_begin = 1, slice_end = 2, instant = 3, counter_value = 4 };
enum : std::uint64_t { incremental_state_cleared = 1, explicit_order = 3 };
}  // namespace

perfetto_trace_writer::perfetto_trace_writer(const std::string& path) : out_(path, std::ios::binary) {
  if (!out_) throw error(errc::config_error, "cannot write the trace to " + path);
}

void perfetto_trace_writer::flush(bool all) {
  if (!all && buf_.size() < (std::size_t(1) << 20)) return;
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
}

void perfetto_trace_writer::describe(std::uint64_t uuid, std::uint64_t parent, std::string_view name, bool counter) {
  proto_out p(buf_);
  p.open(trace_packet);
  p.open(packet_track_descriptor);
  p.uint(track_uuid_field, uuid);
  p.text(track_name, name);
  if (parent) {
    p.uint(track_parent, parent);
    p.int64(track_sibling_rank, next_rank_[parent]++);
  }
  if (counter) {
    p.open(track_counter);
    p.close();
  } else {
    // Its children in the order made: a pool's workers by their start, not PoolWorker-1-10 before -1-2.
    p.uint(track_child_ordering, explicit_order);
  }
  p.close();
  p.close();
  flush(false);
}

std::uint64_t perfetto_trace_writer::group_uuid(int group) {
  if (auto it = groups_.find(group); it != groups_.end()) return it->second;
  auto uuid = next_uuid_++;
  groups_[group] = uuid;
  describe(uuid, 0, "group " + std::to_string(group), false);
  return uuid;
}

std::uint64_t perfetto_trace_writer::track_uuid(int group, std::uint32_t track) {
  // A group's first track is the group's own: what is on it is drawn on the group's row, seen
  // before anything is expanded (a pool's maps, the program's run).
  if (track == 0) return group_uuid(group);
  if (auto it = tracks_.find({group, track}); it != tracks_.end()) return it->second;
  auto parent = group_uuid(group);
  auto uuid = next_uuid_++;
  tracks_[{group, track}] = uuid;
  describe(uuid, parent, "track " + std::to_string(track), false);
  return uuid;
}

// Each described once: Perfetto keeps a track's first name, so a second description would only
// add bytes (the builder names each group and track before its first event).
void perfetto_trace_writer::group(int group, std::string_view name, std::int64_t, int) {
  auto [it, added] = groups_.try_emplace(group, 0);
  if (!added) return;
  it->second = next_uuid_++;
  describe(it->second, 0, name, false);
}

void perfetto_trace_writer::track(int group, std::uint32_t track, std::string_view name, std::int64_t) {
  if (track == 0) return;
  auto parent = group_uuid(group);
  auto [it, added] = tracks_.try_emplace({group, track}, 0);
  if (!added) return;
  it->second = next_uuid_++;
  describe(it->second, parent, name, false);
}

perfetto_trace_writer::interned perfetto_trace_writer::intern(std::unordered_map<std::string, std::uint64_t>& table,
                                                               std::string_view s) {
  auto [it, added] = table.try_emplace(std::string(s), table.size() + 1);
  return {it->second, added};
}

perfetto_trace_writer::sequence& perfetto_trace_writer::sequence_of(std::uint64_t uuid) {
  auto& s = sequences_[uuid];
  if (s) return *s;
  s = std::make_unique<sequence>();
  // Its first packet: a fresh state, and its defaults: this track.
  proto_out p(buf_);
  p.open(trace_packet);
  p.uint(packet_sequence_id, uuid);
  p.uint(packet_sequence_flags, incremental_state_cleared);
  p.open(packet_defaults);
  p.open(defaults_track_event);
  p.uint(track_event_defaults_track, uuid);
  p.close();
  p.close();
  p.close();
  return *s;
}

void perfetto_trace_writer::event(std::uint64_t ns, int type, std::uint64_t uuid, std::string_view name,
                                  trace_args args, std::uint64_t flow_out, std::uint64_t flow_in, const double* value) {
  auto& s = sequence_of(uuid);
  proto_out p(buf_);
  p.open(trace_packet);
  p.uint(packet_timestamp, ns);
  p.uint(packet_sequence_id, uuid);
  // The names this packet is the first on its track to use are sent in it, under their numbers.
  interned n{0, false};
  if (!name.empty()) n = intern(s.names, name);
  bool any_new = n.is_new;
  std::uint64_t arg_iids[8];
  bool arg_new[8];
  std::size_t k = 0;
  for (auto& a : args) {
    if (k == 8) break;
    auto i = intern(s.arg_names, a.key);
    arg_iids[k] = i.iid;
    arg_new[k++] = i.is_new;
    any_new = any_new || i.is_new;
  }
  if (any_new) {
    p.open(packet_interned_data);
    if (n.is_new) {
      p.open(interned_event_names);
      p.uint(interned_iid, n.iid);
      p.text(interned_name, name);
      p.close();
    }
    std::size_t j = 0;
    for (auto& a : args) {
      if (j == k) break;
      if (arg_new[j]) {
        p.open(interned_annotation_names);
        p.uint(interned_iid, arg_iids[j]);
        p.text(interned_name, a.key);
        p.close();
      }
      ++j;
    }
    p.close();
  }
  p.open(packet_track_event);
  p.uint(event_type, static_cast<std::uint64_t>(type));
  if (n.iid) p.uint(event_name_iid, n.iid);
  std::size_t j = 0;
  for (auto& a : args) {
    if (j == k) break;
    p.open(event_debug_annotation);
    p.uint(annotation_name_iid, arg_iids[j++]);
    if (auto* i = std::get_if<std::int64_t>(&a.value)) p.int64(annotation_int, *i);
    else if (auto* d = std::get_if<double>(&a.value)) p.real(annotation_double, *d);
    else p.text(annotation_string, std::get<std::string_view>(a.value));
    p.close();
  }
  if (flow_out) p.uint(event_flow_ids, flow_out);
  if (flow_in) p.uint(event_terminating_flow_ids, flow_in);
  // A whole number as a varint (a count: a byte or two), else as a double.
  if (value && *value == static_cast<double>(static_cast<std::int64_t>(*value)))
    p.int64(event_counter_value, static_cast<std::int64_t>(*value));
  else if (value)
    p.real(event_double_counter_value, *value);
  p.close();
  p.close();
  flush(false);
}

void perfetto_trace_writer::span(int group, std::uint32_t track, std::string_view name, std::uint64_t from_ns,
                                 std::uint64_t to_ns, trace_args args, std::uint64_t flow_in) {
  auto uuid = track_uuid(group, track);
  event(from_ns, slice_begin, uuid, name, args, 0, flow_in);
  event(to_ns, slice_end, uuid, {}, {}, 0, 0);
}

void perfetto_trace_writer::mark(int group, std::uint32_t track, std::string_view name, std::uint64_t ns, trace_args args) {
  event(ns, instant, track_uuid(group, track), name, args, 0, 0);
}

void perfetto_trace_writer::flow_from(int group, std::uint32_t track, std::uint64_t ns, std::uint64_t id) {
  event(ns, instant, track_uuid(group, track), "sent", {}, id, 0);
}

void perfetto_trace_writer::counter(int group, std::string_view name, std::string_view series, std::uint64_t ns,
                                    double value) {
  auto key = std::make_pair(group, std::string(name) + " " + std::string(series));
  auto it = counters_.find(key);
  if (it == counters_.end()) {
    it = counters_.emplace(key, next_uuid_++).first;
    describe(it->second, group_uuid(group), key.second, true);
  }
  event(ns, counter_value, it->second, {}, {}, 0, 0, &value);
}

void perfetto_trace_writer::close() {
  flush(true);
  out_.close();
  if (!out_) throw error(errc::config_error, "the trace could not be written in full");
}

}  // namespace fiber::detail
