#include "runtime/channels/channel_broker.hpp"

#include "core/log.hpp"

namespace fiber::detail {

void channel_broker::put(std::uint64_t channel, multipart&& payload, bool from_network) {
  auto& ch = channels_[channel];
  while (!ch.readers.empty()) {
    auto r = std::move(ch.readers.front());
    ch.readers.pop_front();
    if (deliver_(r, channel, payload, from_network)) return;  // else try the next waiting reader
  }
  ch.items.push_back(std::move(payload));
}

void channel_broker::get(std::uint64_t channel, channel_reader reader) {
  auto& ch = channels_[channel];
  if (!ch.items.empty()) {
    auto payload = std::move(ch.items.front());
    ch.items.pop_front();
    if (deliver_(reader, channel, payload, false)) return;  // inside get's initiation
    ch.items.push_front(std::move(payload));
    return;  // the reader is gone
  }
  ch.readers.push_back(std::move(reader));
}

bool channel_broker::cancel(std::uint64_t channel, const std::string& peer, std::uint64_t request) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return false;
  auto& rs = it->second.readers;
  for (auto r = rs.begin(); r != rs.end(); ++r)
    if (r->peer == peer && r->request == request) {
      rs.erase(r);
      return true;
    }
  return false;
}

void channel_broker::release(std::uint64_t channel) noexcept {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  if (!it->second.items.empty())
    logf(log_level::warn, "a queue was destroyed with ", it->second.items.size(), " unread message(s)");
  if (it->second.readers.empty())
    channels_.erase(it);
  else
    it->second.released = true;
}

std::vector<std::pair<std::uint64_t, channel_reader>> channel_broker::end_prefix(std::uint32_t prefix,
                                                                                 std::size_t& dropped) {
  std::vector<std::pair<std::uint64_t, channel_reader>> readers;
  dropped = 0;
  for (auto it = channels_.begin(); it != channels_.end();) {
    if (it->first >> 32 != prefix) {
      ++it;
      continue;
    }
    dropped += it->second.items.size();
    for (auto& r : it->second.readers) readers.emplace_back(it->first, std::move(r));
    it = channels_.erase(it);
  }
  return readers;
}

void channel_broker::forget_peer(const std::string& peer) {
  for (auto& [id, ch] : channels_) std::erase_if(ch.readers, [&](const channel_reader& r) { return r.peer == peer; });
}

std::size_t channel_broker::queued(std::uint64_t channel) const {
  auto it = channels_.find(channel);
  return it == channels_.end() ? 0 : it->second.items.size();
}

std::size_t channel_broker::waiting(std::uint64_t channel) const {
  auto it = channels_.find(channel);
  return it == channels_.end() ? 0 : it->second.readers.size();
}

}  // namespace fiber::detail
