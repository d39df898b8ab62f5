#include "runtime/init_guard.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "backend/zygote.hpp"
#include "core/worker_env.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {
class runtime;
std::shared_ptr<runtime>& worker_runtime();  // context.cpp: set in a worker

bool& init_was_called() {
  static bool called = false;
  return called;
}

void require_init() {
  if (init_was_called() || worker_runtime()) return;
  if (std::getenv(env_token) || std::getenv(env_zygote_fd)) {
    std::fprintf(stderr,
                 "fiber: this process was started by fiber as a child, but main() did not call "
                 "fiber::init(argc, argv) first; make it the first line of main()\n");
    std::fflush(stderr);
    std::_Exit(2);
  }
  throw error(errc::spawn_failed,
              "fiber::init(argc, argv) was not called: make it the first line of main(); children run this "
              "program again and need it to become workers");
}

}  // namespace fiber::detail
