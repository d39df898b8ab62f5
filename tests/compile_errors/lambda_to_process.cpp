// Must not compile: a lambda as a process's target.
#include <fiber/fiber.hpp>

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::process p([] {});
}
