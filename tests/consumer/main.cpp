// Built against an installed fiber: runs a child and checks what comes back, blocking and then in a
// coroutine on the program's own io_context (what needs Asio's coroutine support in the program's
// compiler).
#include <fiber/fiber.hpp>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

int triple(int x, fiber::simple_queue<int> out) {
  out.put(3 * x).get();
  return 0;
}
FIBER_REMOTE(triple);

asio::awaitable<int> triple_awaited(fiber::context& ctx) {
  fiber::simple_queue<int> out(ctx);
  fiber::process p(ctx, &triple, 5, out);
  co_await p.start();
  int got = co_await out.get();
  co_await p.join();
  co_return got;
}

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::simple_queue<int> out;
  fiber::process p(&triple, 14, out);
  p.start().get();
  int got = out.get().get();
  p.join().get();
  if (got != 42 || p.exitcode() != 0) return 1;

  asio::io_context io;
  fiber::context ctx(io);
  int awaited = 0;
  asio::co_spawn(io, triple_awaited(ctx), [&](std::exception_ptr e, int v) {
    awaited = e ? -1 : v;
    ctx.stop();
  });
  io.run();
  return awaited == 15 ? 0 : 2;
}
