// A master that starts one child, prints the child's pid, then waits to be killed.
#include <fiber/fiber.hpp>
#include <unistd.h>

#include <cstdio>

void wait_forever(fiber::simple_queue<int> never) { (void)never.get().get(); }
FIBER_REMOTE(wait_forever);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::simple_queue<int> never;
  fiber::process p(&wait_forever, never);
  p.start().get();
  std::printf("%d\n", p.pid());
  std::fflush(stdout);
  for (;;) pause();
}
