// Must not compile: an argument type fiber cannot encode. The compiler's first words must be
// fiber's (what is wrong and what to do), not pages about an incomplete fiber::codec<point>.
#include <fiber/fiber.hpp>

struct point {
  point(int x, int y) : x(x), y(y) {}  // a constructor of its own: not a plain aggregate
  int x, y;
};
void use(point p) { (void)p; }
FIBER_REMOTE(use);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::process p(&use, point{1, 2});
}
