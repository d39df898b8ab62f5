// A reader over an encoded value that arrived as frames: frame `first` is its inline head, the
// frames after it its large-data frames (writer::blobs, sent as frames of their own).
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "fiber/codec.hpp"

namespace fiber::detail {

template <class Frame>
std::span<const std::byte> bytes_of(const Frame& f) {
  return {reinterpret_cast<const std::byte*>(f.data()), f.size()};
}

class frames_reader {
 public:
  /// `frames` (zmq::message_t, std::string, ...) must outlive the reader; `first` must exist.
  template <class Frames>
  frames_reader(const Frames& frames, std::size_t first)
      : blobs_(blobs_after(frames, first)), reader_(bytes_of(frames.at(first)), blobs_) {}
  frames_reader(const frames_reader&) = delete;
  frames_reader& operator=(const frames_reader&) = delete;

  reader& get() noexcept { return reader_; }

 private:
  template <class Frames>
  static std::vector<std::span<const std::byte>> blobs_after(const Frames& frames, std::size_t first) {
    std::vector<std::span<const std::byte>> out;
    for (std::size_t i = first + 1; i < frames.size(); ++i) out.push_back(bytes_of(frames[i]));
    return out;
  }
  std::vector<std::span<const std::byte>> blobs_;
  reader reader_;
};

}  // namespace fiber::detail
