// get() on an op held in a variable: fiber's words name std::move, not "discards qualifiers".
#include <fiber/fiber.hpp>

int twice(int x) { return 2 * x; }
FIBER_REMOTE(twice);

int main() {
  fiber::pool p(2);
  auto h = p.apply(&twice, 21);
  return h.get();
}
