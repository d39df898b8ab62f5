// Chrome's trace event format (chrome://tracing, Perfetto), written one event a line, times in
// µs: what `fiber trace` and fiber::write_trace produce from a run's recording.
#pragma once
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include "fiber/error.hpp"

namespace fiber::detail {

/// `s` as a JSON string, quotes included.
inline std::string json_text(std::string_view s) { return boost::json::serialize(boost::json::string(s)); }

class trace_writer {
 public:
  explicit trace_writer(const std::string& path) : out_(path) {
    if (!out_) throw error(errc::config_error, "cannot write the trace to " + path);
    out_ << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  }
  void meta(const char* what, int pid, std::uint32_t tid, std::string_view name) {
    line() << "{\"ph\":\"M\",\"name\":\"" << what << "\",\"pid\":" << pid << ",\"tid\":" << tid
           << ",\"args\":{\"name\":" << json_text(name) << "}}";
  }
  void span(int pid, std::uint32_t tid, std::string_view name, std::uint64_t from_ns, std::uint64_t to_ns,
            std::string_view args) {
    line() << "{\"ph\":\"X\",\"name\":" << json_text(name) << ",\"pid\":" << pid << ",\"tid\":" << tid
           << ",\"ts\":" << us(from_ns) << ",\"dur\":" << us(to_ns - from_ns) << ",\"args\":{" << args << "}}";
  }
  /// An arrow from (pid, 0) at `from_ns` to the span on `tid` that encloses `to_ns`.
  void flow(std::uint64_t id, int pid, std::uint64_t from_ns, std::uint32_t tid, std::uint64_t to_ns) {
    line() << "{\"ph\":\"s\",\"id\":" << id << ",\"name\":\"map\",\"cat\":\"map\",\"pid\":" << pid
           << ",\"tid\":0,\"ts\":" << us(from_ns) << "}";
    line() << "{\"ph\":\"f\",\"bp\":\"e\",\"id\":" << id << ",\"name\":\"map\",\"cat\":\"map\",\"pid\":" << pid
           << ",\"tid\":" << tid << ",\"ts\":" << us(to_ns) << "}";
  }
  void counter(int pid, std::string_view name, std::uint64_t ns, std::string_view args) {
    line() << "{\"ph\":\"C\",\"name\":" << json_text(name) << ",\"pid\":" << pid << ",\"ts\":" << us(ns)
           << ",\"args\":{" << args << "}}";
  }
  void mark(int pid, std::uint32_t tid, std::string_view name, std::uint64_t ns, std::string_view args) {
    line() << "{\"ph\":\"i\",\"s\":\"t\",\"name\":" << json_text(name) << ",\"pid\":" << pid << ",\"tid\":" << tid
           << ",\"ts\":" << us(ns) << ",\"args\":{" << args << "}}";
  }
  void close() {
    out_ << "\n]}\n";
    out_.close();
    if (!out_) throw error(errc::config_error, "the trace could not be written in full");
  }

 private:
  std::ofstream& line() {
    if (!first_) out_ << ",\n";
    first_ = false;
    return out_;
  }
  static std::string us(std::uint64_t ns) {
    auto s = std::to_string(ns / 1000) + "." + std::to_string(ns % 1000 + 1000).substr(1);
    return s;
  }
  std::ofstream out_;
  bool first_ = true;
};


}  // namespace fiber::detail
