// A finished run drawn as one self-contained page (`fiber history --html`): what the live
// dashboard showed, after the run and its cluster are gone. Tasks done per second over time and
// workers over time, each a line in an SVG, with the run's failures marked where they happened
// (a worker that died, a task lost with it or past its timeout: the items the pool ran again), and
// the run's totals. Drawn here, in the page's markup: the page runs no script and asks for nothing
// more, so it opens from a file anywhere. Each line carries its values (data-values), as the
// recording gives them, for a reader that wants the numbers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/flight_recorder.hpp"
#include "fiber/history.hpp"

namespace fiber::detail {

/// A run's time cut into equal bins, and what each bin holds.
struct history_series {
  std::uint64_t from_ns = 0, bin_ns = 1;
  std::vector<std::uint64_t> done;     // tasks answered in each bin
  std::vector<std::uint64_t> workers;  // pool workers up at most in each bin
  struct mark {
    std::uint64_t ns;
    std::string what;
  };
  std::vector<mark> failures;  // in order
};

/// The series of `records`, in `bins` bins from the first record to the last.
history_series series_of(const std::vector<read_record>& records, std::size_t bins = 120);

/// The page of `run`, whose records are `records`.
std::string history_page(const recorded_run& run, const std::vector<read_record>& records);

}  // namespace fiber::detail
