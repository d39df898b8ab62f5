// A child receives numbers over one queue and answers over another.
#include <fiber/fiber.hpp>

#include <cstdio>

void square_all(fiber::simple_queue<int> in, fiber::simple_queue<int> out) {
  for (;;) {
    int x = in.get().get();
    if (x < 0) return;
    out.put(x * x).get();
  }
}
FIBER_REMOTE(square_all);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::simple_queue<int> in, out;
  fiber::process p(&square_all, in, out);
  p.start().get();
  for (int i = 1; i <= 5; ++i) in.put(i).get();
  in.put(-1).get();
  for (int i = 1; i <= 5; ++i) std::printf("%d squared is %d\n", i, out.get().get());
  p.join().get();
}
