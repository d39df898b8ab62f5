// What the top master hears of its tree for the run's recording and its dashboard: a nested
// master's events of its children (kind::record), a process's own recorder's batches
// (kind::record_batch) and a pool's state (kind::pool_view). Each is read from its frames here,
// checked for the frames and sizes it must have (a message of the wrong shape is dropped: it can
// come only from a process of this job, and it must not take the master down), and handed to
// the function the runtime set for it.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/flight_recorder.hpp"
#include "fiber/detail/unique_function.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail {

class tree_reports {
 public:
  using record_fn = unique_function<void(record_kind, std::string_view name, std::uint64_t c, std::uint64_t d,
                                         std::string_view text)>;
  using records_fn = unique_function<void(std::uint64_t sender, std::uint64_t now, std::string_view tree,
                                          std::string_view records)>;
  using pool_view_fn = unique_function<void(std::uint64_t pool, std::string_view tree, std::string_view state, bool ended)>;

  /// The takers: the runtime's record_child_event, take_record_batch, and its dashboard's view.
  void record_with(record_fn f) noexcept { record_ = std::move(f); }
  void take_records_with(records_fn f) noexcept { take_records_ = std::move(f); }
  void take_pool_views_with(pool_view_fn f) noexcept { take_pool_views_ = std::move(f); }

  /// A message of kind `k` (record, record_batch or pool_view) with header `aux`: true when it was
  /// well formed and taken, false when dropped (its shape, no taker, or another kind).
  bool take(kind k, std::uint32_t aux, const multipart& payload);

 private:
  record_fn record_;
  records_fn take_records_;
  pool_view_fn take_pool_views_;
};

}  // namespace fiber::detail
