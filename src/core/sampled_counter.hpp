// A counter of a trace that changes with every task (the tasks a pool's workers hold, the items
// waiting) written at most once per millisecond of the run's time: a million tasks are not two
// million counter events. A change that falls between two writes is written with the next one, at
// its own time, and the last at the end (finish), so the line a reader sees holds each value from
// when it held. Tested through the trace builder (tests/trace_builder_test.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/trace_sink.hpp"

namespace fiber::detail {

class sampled_counter {
 public:
  sampled_counter(std::string name, std::string series) : name_(std::move(name)), series_(std::move(series)) {}

  void change(trace_sink& out, int group, std::int64_t delta, std::uint64_t ns) {
    if (delta == 0) return;
    auto before = value_;
    value_ += delta;
    if (written_ && ns < at_ + every_ns) {
      pending_ = ns;
      return;
    }
    // What it held since the last change not written, then what it holds now.
    if (pending_) write(out, group, *pending_, before);
    write(out, group, ns, value_);
    at_ = ns;
    written_ = true;
    pending_.reset();
  }
  void finish(trace_sink& out, int group) {
    if (pending_) write(out, group, *pending_, value_);
    pending_.reset();
  }
  std::int64_t value() const noexcept { return value_; }

  static constexpr std::uint64_t every_ns = 1'000'000;

 private:
  void write(trace_sink& out, int group, std::uint64_t ns, std::int64_t v) {
    out.counter(group, name_, series_, ns, static_cast<double>(v));
  }
  std::string name_, series_;
  std::int64_t value_ = 0;
  std::uint64_t at_ = 0;  // when it was last written
  bool written_ = false;
  std::optional<std::uint64_t> pending_;  // when the last change not written yet was
};

}  // namespace fiber::detail
