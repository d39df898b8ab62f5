// A different program that speaks the worker protocol: its build-id differs from the tests'.
#include <fiber/fiber.hpp>

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  return 0;
}
