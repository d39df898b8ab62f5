// A master that starts one child, prints the child's pid, then waits to be killed; with the
// argument `throw`, it ends instead by an exception nobody catches (std::terminate).
#include <fiber/fiber.hpp>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string_view>

void wait_forever(fiber::simple_queue<int> never) { (void)never.get().get(); }
FIBER_REMOTE(wait_forever);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::simple_queue<int> never;
  fiber::process p(&wait_forever, never);
  p.start().get();
  std::printf("%d\n", p.pid());
  std::fflush(stdout);
  if (argc > 1 && std::string_view(argv[1]) == "throw") throw std::runtime_error("a config error nobody caught");
  for (;;) pause();
}
