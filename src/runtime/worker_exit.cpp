#include "runtime/worker_exit.hpp"

#include <cstdio>
#include <cstdlib>

namespace fiber::detail {

void exit_worker(int code) {
  std::fflush(nullptr);
  std::_Exit(code);  // never return into the user's main, and skip its static destructors
}

}  // namespace fiber::detail
