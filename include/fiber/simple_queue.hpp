/// @file
/// A queue shared by processes: many writers, many readers.
///
/// Each message goes to a reader that is waiting for one, in the order readers asked; a busy
/// reader never has messages piled onto it. Handles are cheap to copy and may be passed to
/// children as arguments.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "fiber/codec.hpp"
#include "fiber/context.hpp"
#include "fiber/detail/channel.hpp"
#include "fiber/op.hpp"

namespace fiber {

/// A queue shared by processes, like multiprocessing.SimpleQueue: any process that holds it (as an
/// argument, or in another queue) puts and gets; each value is got once.
template <class T>
class simple_queue {
 public:
  /// A new queue in the default context.
  simple_queue() : simple_queue(context::default_context()) {}
  /// A new queue in `ctx`.
  explicit simple_queue(context& ctx)
      : rt_(ctx.runtime()), id_(std::make_shared<owned_id>(rt_, detail::new_channel_id(*rt_))) {}

  /// Puts a value; completes when it is on its way (the queue is unbounded).
  op<void> put(T value) const { return ops::put(rt_, id_->id, std::move(value)); }
  /// Waits for the next value.
  op<T> get() const {
    static_assert(std::is_default_constructible_v<T>,
                  "fiber::simple_queue<T>::get: T must be default-constructible to be read (an op<T> holds a T before the read completes); put std::optional<T> in the queue instead (for a fiber::connection, say)");
    return ops::get(rt_, id_->id);
  }
  /// Waits at most `timeout`; nullopt when nothing came.
  op<std::optional<T>> get(std::chrono::milliseconds timeout) const {
    static_assert(std::is_default_constructible_v<T>,
                  "fiber::simple_queue<T>::get: T must be default-constructible to be read (an op<T> holds a T before the read completes); put std::optional<T> in the queue instead (for a fiber::connection, say)");
    return ops::get(rt_, id_->id, timeout);
  }

  /// The queue's number in its job: handles that compare equal here are the same queue.
  std::uint64_t id() const noexcept { return id_->id; }

 private:
  struct owned_id {
    std::shared_ptr<detail::runtime> rt;
    std::uint64_t id;
    bool owner = true;
    owned_id(std::shared_ptr<detail::runtime> r, std::uint64_t i, bool own = true) : rt(std::move(r)), id(i), owner(own) {}
    ~owned_id() {
      if (owner) detail::channel_release(*rt, id);
    }
  };
  friend struct codec<simple_queue<T>>;
  simple_queue(std::shared_ptr<detail::runtime> rt, std::uint64_t id)
      : rt_(std::move(rt)), id_(std::make_shared<owned_id>(rt_, id, false)) {}

  using ops = detail::channel_ops<T>;

  std::shared_ptr<detail::runtime> rt_;
  std::shared_ptr<owned_id> id_;
};

/// A queue handle travels as its id; the receiving process reaches it through its master.
/// @cond internal
template <class T>
struct codec<simple_queue<T>> {
  static void encode(writer& w, const simple_queue<T>& q) { w.pod(q.id()); }
  static simple_queue<T> decode(reader& r) {
    auto id = r.pod<std::uint64_t>();
    return simple_queue<T>(context::default_context().runtime(), id);
  }
};
/// @endcond

}  // namespace fiber
