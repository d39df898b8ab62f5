#include "runtime/nested/upward_relay.hpp"

#include "fiber/error.hpp"
#include "runtime/channels/master_channels.hpp"
#include "runtime/nested/nested_relay.hpp"

namespace fiber::detail {

upward_relay::upward_relay(channel_route& up, send_up_fn send_up, pending_gets& gets, send_down_fn send_down)
    : up_(up), send_up_(std::move(send_up)), gets_(gets), send_down_(std::move(send_down)) {}

bool upward_relay::relay(const std::string& peer, const header& h, multipart& payload) {
  switch (relay_of(h.type)) {
    case relay::here: return false;
    case relay::as_is: send_up_(passed_up(h.type, h.aux, std::move(payload))); return true;
    case relay::channel_put: up_.put(h.channel, std::move(payload)); return true;
    case relay::channel_get: forward_get(peer, h.channel, h.request); return true;
    case relay::cancel_get:
      if (auto it = forwarded_.find({peer, h.request}); it != forwarded_.end())
        up_.cancel_get(it->second.first, it->second.second);
      return true;  // the answer to the forwarded get (cancelled, or the item) goes down when it comes
    case relay::maker_gone: up_.maker_gone(h.aux); return true;
  }
  return false;
}

void upward_relay::pass_call_up(const std::string& peer, const header& h, multipart&& payload) {
  // Calls of this process's own never set the top bit of their number.
  auto ours = (std::uint64_t{1} << 63) | ++next_passed_call_;
  passed_calls_[ours] = {peer, h.request};
  payload.insert(payload.begin(), make_header(h.type, h.channel, ours, h.aux, h.flags));
  send_up_(std::move(payload));
}

bool upward_relay::pass_reply_down(const header& h, multipart& payload) {
  auto it = passed_calls_.find(h.request);
  if (it == passed_calls_.end()) return false;
  auto [peer, theirs] = it->second;
  passed_calls_.erase(it);
  multipart m;
  m.reserve(payload.size() + 1);
  m.push_back(make_header(h.type, h.channel, theirs, h.aux, h.flags));
  for (auto& f : payload) m.push_back(std::move(f));
  (void)send_down_(peer, std::move(m));  // a child that is gone hears nothing
  return true;
}

void upward_relay::forward_get(const std::string& peer, std::uint64_t channel, std::uint64_t request) {
  auto ours = gets_.add(channel, [weak = weak_from_this(), peer, channel, request](std::error_code ec, multipart payload,
                                                                                  bool) {
    auto self = weak.lock();
    if (!self) return;
    self->forwarded_.erase({peer, request});
    if (ec == make_error_code(errc::timeout)) {  // withdrawn upstream, as the child asked
      (void)self->send_down_(peer, make_message(kind::cancelled, {.channel = channel, .request = request}));
      return;
    }
    if (ec) {
      std::uint32_t named = ec.category() == fiber_category() ? static_cast<std::uint32_t>(ec.value()) : 0;
      (void)self->send_down_(peer, make_message(kind::failure, {.channel = channel, .request = request, .aux = named},
                                                "the read failed above: " + ec.message()));
      return;
    }
    multipart m;
    m.reserve(payload.size() + 1);
    m.push_back(make_header(kind::item, channel, request));
    for (auto& f : payload) m.push_back(std::move(f));
    if (self->send_down_(peer, std::move(m))) {
      // The reader died meanwhile: the message goes back to its queue rather than being lost.
      multipart back;
      // A send that fails leaves its parts as they were (the move is the contract's, as zmq's send).
      for (std::size_t i = 1; i < m.size(); ++i) back.push_back(std::move(m[i]));  // NOLINT(bugprone-use-after-move)
      if (channel != master_channels::prefix_channel) self->up_.put(channel, std::move(back));
    }
  });
  forwarded_[{peer, request}] = {channel, ours};
  up_.get(channel, ours);
}

void upward_relay::child_ended(const std::string& peer) {
  std::erase_if(passed_calls_, [&](const auto& e) { return e.second.first == peer; });
  if (auto p = prefixes_.find(peer); p != prefixes_.end()) {
    up_.maker_gone(p->second);
    prefixes_.erase(p);
  }
  for (auto it = forwarded_.lower_bound({peer, 0}); it != forwarded_.end() && it->first.first == peer;) {
    auto [channel, ours] = it->second;
    ++it;  // the cancel's answer may erase the entry
    up_.cancel_get(channel, ours);
  }
}

}  // namespace fiber::detail
