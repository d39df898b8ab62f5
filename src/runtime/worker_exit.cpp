#include "runtime/worker_exit.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace fiber::detail {

namespace {
std::atomic<int> clean_code{0};
}  // namespace

void set_clean_exit_code(int code) noexcept { clean_code = code; }
int clean_exit_code() noexcept { return clean_code; }

void exit_worker(int code) {
  std::fflush(nullptr);
  std::_Exit(code);  // never return into the user's main, and skip its static destructors
}

}  // namespace fiber::detail
