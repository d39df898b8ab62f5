// Must not compile: a lambda handed to a pool. The compiler's first words must be fiber's (a
// registered function, &f, FIBER_REMOTE), not a template deduction failure.
#include <fiber/fiber.hpp>

#include <vector>

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::pool pool(2);
  std::vector<int> xs{1, 2, 3};
  auto squares = pool.map([](int x) { return x * x; }, xs);
}
