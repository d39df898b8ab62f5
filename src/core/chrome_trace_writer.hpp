// Chrome's trace event format (chrome://tracing, speedscope, Perfetto's legacy importer), one
// event a line, times in µs: `fiber trace`'s default. A group is a process and a track a thread of
// it; readers show each with a number after its name, so the number asked for is used where it
// is free in its scope (a real pid reads as one), else one of the writer's own above 2^30.
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/trace_sink.hpp"

namespace fiber::detail {

/// `s` as a JSON string, quotes included.
std::string json_text(std::string_view s);

class chrome_trace_writer final : public trace_sink {
 public:
  /// Throws fiber::error (config_error) when `path` cannot be written.
  explicit chrome_trace_writer(const std::string& path);
  void group(int group, std::string_view name, std::int64_t number, int order) override;
  void track(int group, std::uint32_t track, std::string_view name, std::int64_t number) override;
  void span(int group, std::uint32_t track, std::string_view name, std::uint64_t from_ns, std::uint64_t to_ns,
            trace_args args, std::uint64_t flow_in) override;
  void mark(int group, std::uint32_t track, std::string_view name, std::uint64_t ns, trace_args args) override;
  void flow_from(int group, std::uint32_t track, std::uint64_t ns, std::uint64_t id) override;
  void counter(int group, std::string_view name, std::string_view series, std::uint64_t ns, double value) override;
  void close() override;

 private:
  std::ofstream& line();
  std::int64_t pid(int group);
  std::int64_t tid(int group, std::uint32_t track);
  void write_args(trace_args args);

  std::ofstream out_;
  bool first_ = true;
  std::map<int, std::int64_t> pids_;                                  // group -> its pid in the file
  std::map<std::pair<int, std::uint32_t>, std::int64_t> tids_;        // track -> its tid
  std::set<std::int64_t> pids_taken_;
  std::set<std::pair<std::int64_t, std::int64_t>> tids_taken_;        // (pid, tid)
  std::int64_t next_own_ = std::int64_t(1) << 30;
};

}  // namespace fiber::detail
