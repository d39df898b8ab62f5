#include "transport/zmq_context.hpp"

#include <cerrno>

namespace fiber::detail {

zmq::context_t& zmq_context::get() {
  std::lock_guard lock(mutex_);
  if (closed_) {
    errno = ETERM;  // what ZeroMQ says of a context that has ended
    throw zmq::error_t();
  }
  if (!ctx_) ctx_ = std::make_unique<zmq::context_t>();
  return *ctx_;
}

bool zmq_context::made() const {
  std::lock_guard lock(mutex_);
  return ctx_ != nullptr;
}

void zmq_context::close() noexcept {
  std::unique_ptr<zmq::context_t> ending;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    ending = std::move(ctx_);
  }
  // Outside the lock: ending waits for the sockets' lingers, and a thread ending a socket of it
  // must not be stuck behind this.
  if (ending) ending->close();
}

}  // namespace fiber::detail
