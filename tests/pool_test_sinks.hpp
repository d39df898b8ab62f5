// Sinks for the pool's parts tested without a process (task_queue, chunk_feeder, item_delivery):
// one that produces integers and records what comes back, and one that has its answer once an
// item failed, as a map's sink does.
#pragma once
#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "fiber/error.hpp"
#include "primitives/pool/pool_submission.hpp"

namespace fiber_test {

using fiber::detail::item_writer;
using fiber::detail::message;
using fiber::detail::pool_sink;
using fiber::detail::pool_submission;

/// Produces the integers 0..total-1 as items and records what comes back.
struct counting_sink final : pool_sink {
  explicit counting_sink(int total) : total(total) {}
  std::size_t next_items(std::size_t n, item_writer& chunk) override {
    std::size_t k = 0;
    for (; k < n && next < total; ++k, ++next) chunk.add([&](fiber::writer& w) { w.value(std::tuple<int>(next)); });
    return k;
  }
  void on_result(std::size_t index, message m) override { results[index] = fiber::detail::decode_message<int>(m); }
  void on_error(std::size_t index, std::exception_ptr e) override {
    try {
      std::rethrow_exception(e);
    } catch (const fiber::error& err) {
      errors[index] = err.code();
      reasons[index] = err.what();
    }
  }
  void on_finished() override { ++finished; }
  void on_input_failed(std::size_t index, std::exception_ptr) override { input_failed_at = static_cast<int>(index); }

  int total, next = 0;
  std::map<std::size_t, int> results;
  std::map<std::size_t, std::error_code> errors;
  std::map<std::size_t, std::string> reasons;
  int finished = 0;
  int input_failed_at = -1;
};

inline std::shared_ptr<pool_submission> submission_of(std::shared_ptr<counting_sink> sink, std::size_t chunksize, bool retry = true) {
  return std::make_shared<pool_submission>(pool_submission{7, chunksize, std::move(sink), retry, {}});
}

/// A sink that has its answer once an item failed, as a map's: the rest of its call is dropped.
struct answering_sink final : pool_sink {
  std::size_t next_items(std::size_t n, item_writer& chunk) override {
    std::size_t k = 0;
    for (; k < n && next < 10; ++k, ++next) chunk.add([&](fiber::writer& w) { w.value(std::tuple<int>(next)); });
    return k;
  }
  void on_result(std::size_t, message) override {}
  void on_error(std::size_t index, std::exception_ptr e) override {
    try {
      std::rethrow_exception(e);
    } catch (const fiber::remote_error& err) {
      failed.emplace_back(index, err.item());
    } catch (const fiber::error& err) {
      failed.emplace_back(index, err.what());
    }
  }
  bool answered() const override { return !failed.empty(); }
  void on_finished() override { ++finished; }
  int next = 0, finished = 0;
  std::vector<std::pair<std::size_t, std::string>> failed;
};

}  // namespace fiber_test
