// A program that forgot fiber::init: starting a child must fail, not run main() again.
#include <fiber/fiber.hpp>

#include <cstdio>

void noop() {}
FIBER_REMOTE(noop);

int main() {
  try {
    fiber::process p(&noop);
    p.start().get();
    std::printf("started a child without fiber::init\n");
    return 1;
  } catch (const fiber::error& e) {
    std::printf("refused: %s\n", e.what());
    return fiber::active_children().empty() ? 0 : 1;
  }
}
