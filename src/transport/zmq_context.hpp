// A ZeroMQ context made when a socket first needs one. Making a context costs a child about a
// tenth of a millisecond (its mailbox's eventfd, OpenPGM's and libsodium's start, and as much
// again to end it), and a local child talks to its master over a direct link that needs none:
// only a process that opens a ZeroMQ socket pays for one.
#pragma once
#include <memory>
#include <mutex>
#include <zmq.hpp>

namespace fiber::detail {

class zmq_context {
 public:
  zmq_context() = default;
  zmq_context(const zmq_context&) = delete;
  zmq_context& operator=(const zmq_context&) = delete;

  /// The context, made on the first call; any thread may ask.
  zmq::context_t& get();
  /// True once get() has made it.
  bool made() const;
  /// Ends the context (waiting, within each socket's linger, until what was sent has left this
  /// process) if it was made; get() after it throws zmq::error_t, as a closed context's sockets do.
  void close() noexcept;

 private:
  mutable std::mutex mutex_;
  std::unique_ptr<zmq::context_t> ctx_;
  bool closed_ = false;
};

}  // namespace fiber::detail
