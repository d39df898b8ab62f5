#include "transport/shared_lane.hpp"

#include <unistd.h>

#include <algorithm>
#include <asio/post.hpp>
#include <thread>

namespace fiber::detail {

std::shared_ptr<shared_lane> shared_lane::open(asio::io_context& io, std::unique_ptr<shared_channel> channel) {
  std::shared_ptr<shared_lane> lane(new shared_lane(io, std::move(channel)));
  lane->watch_doorbell();
  asio::use_service<spin_pollers>(io).add(lane);
  return lane;
}

shared_lane::shared_lane(asio::io_context& io, std::unique_ptr<shared_channel> channel)
    : io_(io), channel_(std::move(channel)), doorbell_(io, ::dup(channel_->doorbell())) {}

shared_lane::~shared_lane() { close(); }

std::size_t shared_lane::write(const iovec* iov, std::size_t count) noexcept { return channel_->write_some(iov, count); }

std::size_t shared_lane::read(char* into, std::size_t n) noexcept { return channel_->read_some(into, n); }

void shared_lane::when_readable(unique_function<void()> then) {
  if (closed_) return;
  on_readable_ = std::move(then);
  if (!spinning_) arm();
}

void shared_lane::when_writable(unique_function<void()> then) {
  if (closed_) return;
  on_writable_ = std::move(then);
  if (!spinning_) arm();
}

void shared_lane::arm() noexcept {
  // sleep_for_* says so to the peer and looks again: what came before it is seen here, what
  // comes after it rings the doorbell.
  bool ready = (on_readable_ && !channel_->sleep_for_read()) || (on_writable_ && !channel_->sleep_for_write());
  if (!ready) return;
  try {
    asio::post(io_, [weak = weak_from_this()] {
      auto self = weak.lock();
      if (!self) return;
      self->run_ready();
      // What was seen may have been taken meanwhile (a read that ran first): wait again.
      if (!self->closed_ && !self->spinning_) self->arm();
    });
  } catch (...) {  // no memory for the handler: the doorbell rings at the peer's next step
  }
}

bool shared_lane::run_ready() {
  if (closed_) return false;
  bool ran = false;
  if (on_readable_ && can_read()) {
    auto f = std::move(on_readable_);
    on_readable_ = nullptr;
    f();
    ran = true;
  }
  if (!closed_ && on_writable_ && channel_->can_write()) {
    auto f = std::move(on_writable_);
    on_writable_ = nullptr;
    f();
    ran = true;
  }
  return ran;
}

void shared_lane::watch_doorbell() {
  doorbell_.async_wait(asio::posix::stream_descriptor::wait_read, [weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed_) return;
    self->channel_->woke();  // empties the doorbell and takes back what this side said
    self->run_ready();
    if (self->closed_) return;
    if (!self->spinning_) self->arm();
    self->watch_doorbell();
  });
}

bool shared_lane::wait_writable(clock::time_point until) {
  // The loop's thread owns the doorbell (it empties it), so a thread outside the loop looks at
  // the ring instead, backing off from 20 µs to a millisecond: this waits only when the ring is
  // full, the peer behind by a whole ring.
  for (auto pause = std::chrono::microseconds(20);; pause = std::min(pause * 2, std::chrono::microseconds(1000))) {
    if (closed_) return false;
    if (channel_->can_write()) return true;
    if (clock::now() >= until) return false;
    std::this_thread::sleep_for(pause);
  }
}

void shared_lane::close() noexcept {
  if (closed_.exchange(true)) return;
  // The doorbell's wait ends on the loop: closing a descriptor another thread may be waiting on
  // is the io_context's to do.
  try {
    asio::post(io_, [self = shared_from_this()] {
      std::error_code ignored;
      self->doorbell_.close(ignored);
      self->on_readable_ = nullptr;
      self->on_writable_ = nullptr;
    });
  } catch (const std::bad_weak_ptr&) {  // from the destructor: nobody else holds it any more
    std::error_code ignored;
    doorbell_.close(ignored);
  } catch (...) {
  }
}

void shared_lane::awake() noexcept {
  spinning_ = true;
  channel_->stay_awake();
}

bool shared_lane::poll() { return run_ready(); }

void shared_lane::asleep() noexcept {
  spinning_ = false;
  if (!closed_) arm();
}

}  // namespace fiber::detail
