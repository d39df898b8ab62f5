// Perfetto's protobuf as core/perfetto_trace_writer writes it, read back field by field (the
// Chromium test, perfetto_trace_test, loads it in Perfetto's own UI): groups and tracks are
// descriptors under their parent, each track's events a sequence of its own that names the track
// once in its defaults, names interned once per sequence, a span a begin and an end.
#include "core/perfetto_trace_writer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "run_folder.hpp"

namespace {

/// One field of a message: its number, and its value (a varint) or bytes (length-delimited).
struct field {
  std::uint32_t number;
  std::uint64_t value = 0;
  std::string bytes;
};

std::uint64_t varint(const std::string& b, std::size_t& i) {
  std::uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    auto c = static_cast<unsigned char>(b.at(i++));
    v |= std::uint64_t(c & 0x7f) << shift;
    if (c < 0x80) return v;
  }
}

std::vector<field> fields(const std::string& b) {
  std::vector<field> out;
  for (std::size_t i = 0; i < b.size();) {
    auto tag = varint(b, i);
    field f{static_cast<std::uint32_t>(tag >> 3)};
    switch (tag & 7) {
      case 0: f.value = varint(b, i); break;
      case 1: f.bytes = b.substr(i, 8), i += 8; break;
      case 2: {
        auto n = varint(b, i);
        f.bytes = b.substr(i, n);
        i += n;
        break;
      }
      default: ADD_FAILURE() << "wire type " << (tag & 7); return out;
    }
    out.push_back(std::move(f));
  }
  return out;
}

const field* get(const std::vector<field>& fs, std::uint32_t number) {
  for (auto& f : fs)
    if (f.number == number) return &f;
  return nullptr;
}

/// The packets of a trace written by `write`.
template <class F>
std::vector<std::vector<field>> packets_of(F write) {
  auto path = fiber_test::run_folder() / ("perfetto-writer-" + std::to_string(::getpid()) + ".pftrace");
  {
    fiber::detail::perfetto_trace_writer out(path.string());
    write(out);
    out.close();
  }
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(path);
  std::vector<std::vector<field>> out;
  for (auto& p : fields(text)) {
    EXPECT_EQ(p.number, 1u) << "a Trace holds packets only";
    out.push_back(fields(p.bytes));
  }
  return out;
}

// TracePacket, TrackDescriptor, TrackEvent fields.
constexpr std::uint32_t timestamp = 8, sequence_id = 10, track_event = 11, interned = 12, flags = 13, defaults = 59,
                        descriptor = 60;

}  // namespace

TEST(perfetto_trace_writer, groups_and_tracks_are_descriptors_under_their_parent_in_the_order_made) {
  auto packets = packets_of([](auto& out) {
    out.group(1, "pool 1", 1, 1);
    out.track(1, 0, "master", 42);  // the group's own: no track of its own
    out.track(1, 5, "PoolWorker-1-2", 43);
    out.track(1, 4, "PoolWorker-1-1", 44);
  });
  std::vector<std::vector<field>> descriptors;
  for (auto& p : packets)
    if (auto* d = get(p, descriptor)) descriptors.push_back(fields(d->bytes));
  ASSERT_EQ(descriptors.size(), 3u);
  EXPECT_EQ(get(descriptors[0], 2)->bytes, "pool 1");
  EXPECT_FALSE(get(descriptors[0], 5)) << "a group is at the top";
  EXPECT_EQ(get(descriptors[0], 11)->value, 3u) << "its children in the explicit order";
  auto group = get(descriptors[0], 1)->value;
  EXPECT_EQ(get(descriptors[1], 2)->bytes, "PoolWorker-1-2");
  EXPECT_EQ(get(descriptors[1], 5)->value, group);
  EXPECT_EQ(get(descriptors[1], 12)->value, 0u);
  EXPECT_EQ(get(descriptors[2], 12)->value, 1u) << "made second, shown second";
}

TEST(perfetto_trace_writer, a_tracks_events_are_a_sequence_that_names_the_track_once_and_interns_names_once) {
  auto packets = packets_of([](auto& out) {
    out.group(1, "pool 1", 1, 1);
    out.track(1, 4, "PoolWorker-1-1", 44);
    out.span(1, 4, "task", 1000, 2000, {{"task", std::int64_t(7)}}, 0);
    out.span(1, 4, "task", 3000, 4000, {{"task", std::int64_t(8)}}, 5);
    out.counter(1, "tasks", "held by workers", 3000, 2.0);
  });
  std::vector<std::vector<field>> events;  // the worker's sequence, in order
  std::uint64_t worker = 0;
  for (auto& p : packets)
    if (auto* d = get(p, descriptor); d && get(fields(d->bytes), 2)->bytes == "PoolWorker-1-1")
      worker = get(fields(d->bytes), 1)->value;
  for (auto& p : packets)
    if (get(p, sequence_id) && get(p, sequence_id)->value == worker) events.push_back(p);
  ASSERT_EQ(events.size(), 5u) << "its start and two spans of a begin and an end each";
  // The first: a fresh state and, in its defaults, the track every event of it is on.
  EXPECT_EQ(get(events[0], flags)->value, 1u);
  auto track_defaults = fields(get(fields(get(events[0], defaults)->bytes), 11)->bytes);
  EXPECT_EQ(get(track_defaults, 11)->value, worker);
  auto begin = fields(get(events[1], track_event)->bytes);
  EXPECT_EQ(get(begin, 9)->value, 1u);
  EXPECT_FALSE(get(begin, 11)) << "no track in the event: the sequence's";
  EXPECT_EQ(get(events[1], timestamp)->value, 1000u);
  ASSERT_TRUE(get(events[1], interned)) << "'task' is new to this sequence";
  EXPECT_EQ(get(fields(get(events[2], track_event)->bytes), 9)->value, 2u);
  EXPECT_EQ(get(events[2], timestamp)->value, 2000u);
  EXPECT_FALSE(get(events[3], interned)) << "and known after";
  auto second = fields(get(events[3], track_event)->bytes);
  EXPECT_EQ(get(second, 10)->value, get(begin, 10)->value) << "the same name, by its number";
  EXPECT_EQ(get(second, 42)->value, 5u) << "the arrow it ends";
  // The counter, a whole number, as a varint.
  bool counted = false;
  for (auto& p : packets)
    if (auto* e = get(p, track_event); e && get(fields(e->bytes), 9)->value == 4) {
      EXPECT_EQ(get(fields(e->bytes), 30)->value, 2u);
      counted = true;
    }
  EXPECT_TRUE(counted);
}
