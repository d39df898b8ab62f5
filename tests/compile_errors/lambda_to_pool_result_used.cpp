// Must not compile: a lambda handed to a pool whose result is used, as a caller writes it
// (.get() into a vector, co_await in a coroutine). fiber's words must be the compiler's only
// error: no "invalid use of void" before them.
#include <fiber/fiber.hpp>

#include <vector>

asio::awaitable<void> squares_of(fiber::pool& pool, std::vector<int> xs) {
  std::vector<int> ys = co_await pool.map([](int x) { return x * x; }, xs);
}

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::pool pool(2);
  std::vector<int> xs{1, 2, 3};
  std::vector<int> ys = pool.map([](int x) { return x * x; }, xs).get();
  auto one = pool.apply([](int x) { return x; }, 1).get();
}
