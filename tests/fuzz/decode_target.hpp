// What the decoders face from a peer: arbitrary bytes read as values of many types, split into
// an inline head and large-data frames as the wire splits them, and as a header frame. Shared by
// the libFuzzer target (decode_fuzz.cpp, FIBER_FUZZ=ON) and the corpus regression test.
#pragma once
#include <fiber/codec.hpp>
#include <fiber/error.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "runtime/protocol.hpp"

namespace fiber_fuzz {

struct sample {  // a plain aggregate: decoded field by field
  int id;
  bool flag;
  double weight;
  std::string name;
  std::vector<float> values;
};

template <class T>
void decode_as(const fiber::reader& input) {
  fiber::reader r = input;
  (void)r.value<T>();
}

/// Decodes `data` as the type its first byte picks. Returns normally, or throws
/// fiber::error(malformed_message); anything else escaping is a bug.
inline void decode_one(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return;
  auto pick = data[0] % 12;
  auto frames = data[1] % 4;  // how many large-data frames follow the head
  std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(data + 2), size - 2);
  // The head takes half of the rest; the frames share the other half equally.
  auto head = rest.first(rest.size() / 2);
  std::vector<std::span<const std::byte>> blobs;
  auto tail = rest.subspan(head.size());
  for (std::size_t i = 0; i < frames; ++i) {
    auto n = i + 1 == frames ? tail.size() : tail.size() / (frames - i);
    blobs.push_back(tail.first(n));
    tail = tail.subspan(n);
  }
  fiber::reader r(head, blobs);
  switch (pick) {
    case 0: return decode_as<bool>(r);
    case 1: return decode_as<std::string>(r);
    case 2: return decode_as<std::vector<double>>(r);
    case 3: return decode_as<std::vector<bool>>(r);
    case 4: return decode_as<std::vector<std::string>>(r);
    case 5: return decode_as<std::map<std::string, std::vector<int>>>(r);
    case 6: return decode_as<std::variant<int, std::string, std::vector<bool>>>(r);
    case 7: return decode_as<std::optional<std::tuple<bool, std::set<int>, char>>>(r);
    case 8: return decode_as<sample>(r);
    case 9: return decode_as<std::vector<sample>>(r);
    case 10: {  // what a flat store (a manager's namespace) holds
      std::string_view flat(reinterpret_cast<const char*>(rest.data()), rest.size());
      (void)fiber::decode_flat<std::pair<std::string, std::optional<bool>>>(flat);
      return;
    }
    default: {  // a header frame
      zmq::message_t m(rest.data(), rest.size());
      if (auto h = fiber::detail::parse_header(m)) {
        auto k = static_cast<unsigned>(h->type);
        bool runtime_kind = k >= 1 && k <= fiber::detail::last_runtime_kind;
        bool service_kind = k >= fiber::detail::first_service_kind && k <= fiber::detail::last_service_kind;
        if (!runtime_kind && !service_kind) __builtin_trap();  // an accepted kind out of range
      }
      return;
    }
  }
}

}  // namespace fiber_fuzz
