// A master that starts one child, prints the child's pid, then waits to be killed; with the
// argument `throw`, it ends instead by an exception nobody catches (std::terminate); with
// `nested`, its child starts a child of its own, and both pids are printed (child, grandchild).
#include <fiber/fiber.hpp>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string_view>

void wait_forever(fiber::simple_queue<int> never) { (void)never.get().get(); }
void start_then_wait_forever(fiber::simple_queue<int> never, fiber::simple_queue<int> pids) {
  fiber::process grandchild(&wait_forever, never);
  grandchild.start().get();
  pids.put(grandchild.pid()).get();
  (void)never.get().get();
}
FIBER_REMOTE(wait_forever);
FIBER_REMOTE(start_then_wait_forever);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  std::string_view mode = argc > 1 ? argv[1] : "";
  fiber::simple_queue<int> never, pids;
  auto p = mode == "nested" ? fiber::process(&start_then_wait_forever, never, pids) : fiber::process(&wait_forever, never);
  p.start().get();
  std::printf("%d\n", p.pid());
  if (mode == "nested") std::printf("%d\n", pids.get().get());
  std::fflush(stdout);
  if (mode == "throw") throw std::runtime_error("a config error nobody caught");
  for (;;) pause();
}
