// A fiber program that prints its arguments and exits with the first one's value: what the
// fiber command's tests run (attach's exit code, logs).
#include <fiber/fiber.hpp>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  for (int i = 1; i < argc; ++i) std::printf("argument %d: %s\n", i, argv[i]);
  std::fflush(stdout);
  return argc > 1 ? std::atoi(argv[1]) : 0;
}
