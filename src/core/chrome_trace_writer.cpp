#include "core/chrome_trace_writer.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <cstdio>

#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
/// Nanoseconds as µs with three decimals.
std::string us(std::uint64_t ns) { return std::to_string(ns / 1000) + "." + std::to_string(ns % 1000 + 1000).substr(1); }
/// Readers show a process's or thread's number after its name: a name that ends with it ("pool
/// 1", number 1) is written without, and reads as given.
std::string_view without_number(std::string_view name, std::int64_t number) {
  auto suffix = " " + std::to_string(number);
  return name.size() > suffix.size() && name.ends_with(suffix) ? name.substr(0, name.size() - suffix.size()) : name;
}
}  // namespace

std::string json_text(std::string_view s) { return boost::json::serialize(boost::json::string(s)); }

chrome_trace_writer::chrome_trace_writer(const std::string& path) : out_(path) {
  if (!out_) throw error(errc::config_error, "cannot write the trace to " + path);
  out_ << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
}

std::ofstream& chrome_trace_writer::line() {
  if (!first_) out_ << ",\n";
  first_ = false;
  return out_;
}

std::int64_t chrome_trace_writer::pid(int group) {
  if (auto it = pids_.find(group); it != pids_.end()) return it->second;
  // A group never named (a sink's caller names each first) still gets a number of its own.
  auto n = next_own_++;
  pids_taken_.insert(n);
  return pids_[group] = n;
}

std::int64_t chrome_trace_writer::tid(int group, std::uint32_t track) {
  if (auto it = tids_.find({group, track}); it != tids_.end()) return it->second;
  auto n = next_own_++;
  tids_taken_.insert({pid(group), n});
  return tids_[{group, track}] = n;
}

void chrome_trace_writer::group(int group, std::string_view name, std::int64_t number, int order) {
  auto it = pids_.find(group);
  if (it == pids_.end()) {
    auto n = number > 0 && !pids_taken_.count(number) ? number : next_own_++;
    pids_taken_.insert(n);
    it = pids_.emplace(group, n).first;
  }
  line() << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << it->second << ",\"tid\":0,\"args\":{\"name\":"
         << json_text(without_number(name, it->second)) << "}}";
  line() << "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" << it->second
         << ",\"tid\":0,\"args\":{\"sort_index\":" << order << "}}";
}

void chrome_trace_writer::track(int group, std::uint32_t track, std::string_view name, std::int64_t number) {
  auto p = pid(group);
  auto it = tids_.find({group, track});
  if (it == tids_.end()) {
    auto n = number > 0 && !tids_taken_.count({p, number}) ? number : next_own_++;
    tids_taken_.insert({p, n});
    it = tids_.emplace(std::make_pair(group, track), n).first;
  }
  line() << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << p << ",\"tid\":" << it->second
         << ",\"args\":{\"name\":" << json_text(without_number(name, it->second)) << "}}";
}

void chrome_trace_writer::write_args(trace_args args) {
  out_ << ",\"args\":{";
  bool first = true;
  for (auto& a : args) {
    out_ << (first ? "" : ",") << json_text(a.key) << ':';
    first = false;
    if (auto* i = std::get_if<std::int64_t>(&a.value)) out_ << *i;
    else if (auto* d = std::get_if<double>(&a.value)) {
      char b[32];
      std::snprintf(b, sizeof b, "%.6g", *d);
      out_ << b;
    } else
      out_ << json_text(std::get<std::string_view>(a.value));
  }
  out_ << '}';
}

void chrome_trace_writer::span(int group, std::uint32_t track, std::string_view name, std::uint64_t from_ns,
                               std::uint64_t to_ns, trace_args args, std::uint64_t flow_in) {
  auto p = pid(group), t = tid(group, track);
  line() << "{\"ph\":\"X\",\"name\":" << json_text(name) << ",\"pid\":" << p << ",\"tid\":" << t
         << ",\"ts\":" << us(from_ns) << ",\"dur\":" << us(to_ns - from_ns);
  write_args(args);
  out_ << '}';
  // The arrow's end binds to the span that encloses its time on this track: this one.
  if (flow_in)
    line() << "{\"ph\":\"f\",\"bp\":\"e\",\"id\":" << flow_in << ",\"name\":\"task\",\"cat\":\"task\",\"pid\":" << p
           << ",\"tid\":" << t << ",\"ts\":" << us(from_ns) << "}";
}

void chrome_trace_writer::mark(int group, std::uint32_t track, std::string_view name, std::uint64_t ns, trace_args args) {
  line() << "{\"ph\":\"i\",\"s\":\"t\",\"name\":" << json_text(name) << ",\"pid\":" << pid(group)
         << ",\"tid\":" << tid(group, track) << ",\"ts\":" << us(ns);
  write_args(args);
  out_ << '}';
}

void chrome_trace_writer::flow_from(int group, std::uint32_t track, std::uint64_t ns, std::uint64_t id) {
  // Its start binds to the span that encloses `ns` on the track (the caller keeps one there).
  line() << "{\"ph\":\"s\",\"id\":" << id << ",\"name\":\"task\",\"cat\":\"task\",\"pid\":" << pid(group)
         << ",\"tid\":" << tid(group, track) << ",\"ts\":" << us(ns) << "}";
}

void chrome_trace_writer::counter(int group, std::string_view name, std::string_view series, std::uint64_t ns,
                                  double value) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", value);
  line() << "{\"ph\":\"C\",\"name\":" << json_text(name) << ",\"pid\":" << pid(group) << ",\"ts\":" << us(ns)
         << ",\"args\":{" << json_text(series) << ':' << b << "}}";
}

void chrome_trace_writer::close() {
  out_ << "\n]}\n";
  out_.close();
  if (!out_) throw error(errc::config_error, "the trace could not be written in full");
}

}  // namespace fiber::detail
