#include "primitives/pool/message_log.hpp"

#include <cstring>
#include <limits>

namespace fiber::detail {
namespace {
constexpr std::uint32_t large_marker = std::numeric_limits<std::uint32_t>::max();

void append_u32(std::string& out, std::uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

std::uint32_t u32_at(const std::string& in, std::size_t at) {
  std::uint32_t v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}
}  // namespace

void message_log::append(const multipart& m) {
  index_.push_back({bytes_.size(), large_appended_});
  append_u32(bytes_, static_cast<std::uint32_t>(m.size()));
  for (auto& frame : m) {
    if (frame.size() >= large_frame) {
      append_u32(bytes_, large_marker);
      large_.emplace_back().copy(const_cast<zmq::message_t&>(frame));
      ++large_appended_;
      continue;
    }
    append_u32(bytes_, static_cast<std::uint32_t>(frame.size()));
    bytes_.append(static_cast<const char*>(frame.data()), frame.size());
  }
}

void message_log::drop_before(std::uint64_t p) {
  while (first_ < p && !index_.empty()) {
    index_.pop_front();
    ++first_;
  }
  auto large_kept = index_.empty() ? large_appended_ : index_.front().large;
  while (large_first_ < large_kept) {
    large_.pop_front();
    ++large_first_;
  }
  // The buffer's front goes once it is most of it: each byte moved once on average.
  auto front = index_.empty() ? bytes_.size() : index_.front().at;
  if (front >= (std::size_t{64} << 10) && front * 2 >= bytes_.size()) {
    bytes_.erase(0, front);
    for (auto& w : index_) w.at -= front;
  } else if (index_.empty()) {
    bytes_.clear();
  }
}

std::vector<multipart> message_log::copies(std::uint64_t from, std::uint64_t to) const {
  std::vector<multipart> out;
  for (auto i = from; i < to && i >= first_ && i < end(); ++i) {
    auto w = index_[static_cast<std::size_t>(i - first_)];
    auto at = w.at;
    auto large = w.large - large_first_;
    auto frames = u32_at(bytes_, at);
    at += sizeof frames;
    multipart m(frames);
    for (auto& frame : m) {
      auto n = u32_at(bytes_, at);
      at += sizeof n;
      if (n == large_marker) {
        frame.copy(const_cast<zmq::message_t&>(large_[static_cast<std::size_t>(large++)]));
        continue;
      }
      frame.rebuild(bytes_.data() + at, n);
      at += n;
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace fiber::detail
