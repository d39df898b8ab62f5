/// @file
/// Two connected ends, duplex or one-way, like multiprocessing.Pipe.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "fiber/codec.hpp"
#include "fiber/context.hpp"
#include "fiber/detail/channel.hpp"
#include "fiber/op.hpp"

namespace fiber {

template <class T>
class connection;
template <class T>
std::pair<connection<T>, connection<T>> pipe(bool duplex = true);
template <class T>
std::pair<connection<T>, connection<T>> pipe(context& ctx, bool duplex = true);

/// One end of a pipe. Ends may be passed to children as arguments.
template <class T>
class connection {
 public:
  /// Sends `value` to the other end; errc::wrong_direction on a receive-only end.
  op<void> send(T value) const {
    if (!send_) throw error(errc::wrong_direction, "send on the receiving end of a one-way pipe; use the second end of pipe(false) to send");
    return ops::put(rt_, send_, std::move(value));
  }
  /// The next value the other end sent, waiting for it; errc::wrong_direction on a send-only end.
  op<T> recv() const {
    check_recv();
    return ops::get(rt_, recv_);
  }
  /// As recv(), waiting at most `timeout`: nullopt when nothing came.
  op<std::optional<T>> recv(std::chrono::milliseconds timeout) const {
    check_recv();
    return ops::get(rt_, recv_, timeout);
  }
  /// False for the receiving end of a one-way pipe.
  bool can_send() const noexcept { return send_ != 0; }
  /// False for the sending end of a one-way pipe.
  bool can_recv() const noexcept { return recv_ != 0; }

 private:
  friend std::pair<connection, connection> pipe<T>(context&, bool);
  friend struct codec<connection<T>>;
  connection(std::shared_ptr<detail::runtime> rt, std::uint64_t send, std::uint64_t recv)
      : rt_(std::move(rt)), send_(send), recv_(recv) {}
  void check_recv() const {
    if (!recv_) throw error(errc::wrong_direction, "recv on the sending end of a one-way pipe; use the first end of pipe(false) to receive");
  }
  using ops = detail::channel_ops<T>;

  std::shared_ptr<detail::runtime> rt_;
  std::uint64_t send_ = 0, recv_ = 0;
};

/// duplex: both ends send and receive. One-way: the first end receives, the second sends.
template <class T>
std::pair<connection<T>, connection<T>> pipe(context& ctx, bool duplex) {
  auto rt = ctx.runtime();
  auto a_to_b = detail::new_channel_id(*rt);
  if (!duplex) return {connection<T>(rt, 0, a_to_b), connection<T>(rt, a_to_b, 0)};
  auto b_to_a = detail::new_channel_id(*rt);
  return {connection<T>(rt, a_to_b, b_to_a), connection<T>(rt, b_to_a, a_to_b)};
}
/// A pipe in the default context.
template <class T>
std::pair<connection<T>, connection<T>> pipe(bool duplex) {
  return pipe<T>(context::default_context(), duplex);
}

/// @cond internal
template <class T>
struct codec<connection<T>> {
  static void encode(writer& w, const connection<T>& c) {
    w.pod(c.send_);
    w.pod(c.recv_);
  }
  static connection<T> decode(reader& r) {
    auto s = r.pod<std::uint64_t>();
    auto v = r.pod<std::uint64_t>();
    return connection<T>(context::default_context().runtime(), s, v);
  }
};
/// @endcond

}  // namespace fiber
