// Built against an installed fiber: runs a child and checks what comes back.
#include <fiber/fiber.hpp>

int triple(int x, fiber::simple_queue<int> out) {
  out.put(3 * x).get();
  return 0;
}
FIBER_REMOTE(triple);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::simple_queue<int> out;
  fiber::process p(&triple, 14, out);
  p.start().get();
  int got = out.get().get();
  p.join().get();
  return got == 42 && p.exitcode() == 0 ? 0 : 1;
}
