#include "runtime/channels/master_channels.hpp"

#include <atomic>
#include <cstdlib>

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail {

master_channels::master_channels(pending_gets& gets, send_fn send)
    : gets_(gets),
      send_(std::move(send)),
      broker_([this](const channel_reader& r, std::uint64_t channel, multipart& payload, bool may_run_inline) {
        return deliver(r, channel, payload, may_run_inline);
      }) {}

std::uint32_t master_channels::new_peer() {
  static std::atomic<std::uint32_t> next{1};
  return next++;
}

void master_channels::put_from(const std::string& peer, std::uint64_t channel, multipart&& payload) {
  if (maker_has_gone(channel)) {
    logf(log_level::warn, "a message from ", peer, " to a queue or pipe whose maker has ended was dropped");
    return;
  }
  broker_.put(channel, std::move(payload), true);
}

void master_channels::get_from(const std::string& peer, std::uint64_t channel, std::uint64_t request) {
  if (channel == prefix_channel) {
    // A nested master asks a prefix for its new child. Its channels end with it (kind::maker_gone),
    // or with the child of this master it came through.
    auto prefix = new_peer();
    handed_out_[prefix] = peer;
    (void)send_(peer, make_message(kind::item, {.channel = channel, .request = request}, as_pod(prefix)));
    return;
  }
  if (maker_has_gone(channel)) return fail_read(channel_reader{peer, request}, channel);
  broker_.get(channel, channel_reader{peer, request});
}

void master_channels::cancel_from(const std::string& peer, std::uint64_t channel, std::uint64_t request) {
  if (broker_.cancel(channel, peer, request))
    (void)send_(peer, make_message(kind::cancelled, {.channel = channel, .request = request}));
}

void master_channels::child_ended(const std::string& peer, bool end_its_channels) {
  if (end_its_channels) {
    std::vector<std::uint32_t> ended{static_cast<std::uint32_t>(std::strtoul(peer.c_str(), nullptr, 10))};
    for (auto& [prefix, through] : handed_out_)
      if (through == peer) ended.push_back(prefix);
    for (auto prefix : ended) maker_gone(prefix);
  }
  broker_.forget_peer(peer);  // readers that died while waiting must not receive messages
}

void master_channels::put(std::uint64_t channel, multipart&& payload) {
  if (maker_has_gone(channel)) {
    logf(log_level::warn, "a message to a queue or pipe whose maker has ended was dropped");
    return;
  }
  broker_.put(channel, std::move(payload), false);
}

void master_channels::get(std::uint64_t channel, std::uint64_t request) {
  if (maker_has_gone(channel)) return fail_read(channel_reader{{}, request}, channel);
  broker_.get(channel, channel_reader{{}, request});
}

void master_channels::cancel_get(std::uint64_t channel, std::uint64_t request) {
  if (broker_.cancel(channel, {}, request)) gets_.complete(request, make_error_code(errc::timeout), {}, true);
}

void master_channels::maker_gone(std::uint32_t prefix) {
  if (prefix == 0) return;  // the top master's own: they end with the job
  gone_makers_.insert(prefix);
  handed_out_.erase(prefix);
  std::size_t dropped = 0;
  for (auto& [channel, reader] : broker_.end_prefix(prefix, dropped)) fail_read(reader, channel);
  if (dropped)
    logf(log_level::warn, dropped, " message(s) nobody read were dropped with the queues and pipes of a process that ended");
}

void master_channels::shutdown() noexcept {
  gets_.fail_all(make_error_code(errc::closed));
  broker_.clear();
}

bool master_channels::deliver(const channel_reader& r, std::uint64_t channel, multipart& payload, bool may_run_inline) {
  if (r.peer.empty()) {
    gets_.complete(r.request, {}, std::move(payload), may_run_inline);
    return true;
  }
  multipart m;
  m.reserve(payload.size() + 1);
  m.push_back(make_header(kind::item, channel, r.request));
  for (auto& f : payload) m.push_back(std::move(f));
  if (auto ec = send_(r.peer, std::move(m))) {
    // The reader is gone: the item stays in the queue for the next reader.
    logf(log_level::warn, "reader ", r.peer, " is gone (", ec.message(), "); message kept for the next reader");
    payload.clear();
    // A send that fails leaves its parts as they were (the move is the contract's, as zmq's send).
    for (std::size_t i = 1; i < m.size(); ++i) payload.push_back(std::move(m[i]));  // NOLINT(bugprone-use-after-move)
    return false;
  }
  return true;
}

void master_channels::fail_read(const channel_reader& reader, std::uint64_t channel) {
  if (reader.peer.empty()) {
    gets_.complete(reader.request, make_error_code(errc::maker_gone), {}, false);
    return;
  }
  (void)send_(reader.peer, make_message(kind::failure,
                                        {.channel = channel, .request = reader.request,
                                         .aux = static_cast<std::uint32_t>(errc::maker_gone)},
                                        make_error_code(errc::maker_gone).message()));
}

}  // namespace fiber::detail
