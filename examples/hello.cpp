// A child prints a greeting.
#include <fiber/fiber.hpp>

#include <cstdio>

void greet(std::string who) { std::printf("Hello, %s!\n", who.c_str()); }
FIBER_REMOTE(greet);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::process p(&greet, "Fiber");
  p.start().get();
  p.join().get();
  return *p.exitcode();
}
