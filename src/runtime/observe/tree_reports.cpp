#include "runtime/observe/tree_reports.hpp"

#include <cstring>

namespace fiber::detail {
namespace {
std::uint64_t u64(const zmq::message_t& frame) {
  std::uint64_t v = 0;
  std::memcpy(&v, frame.data(), 8);
  return v;
}
}  // namespace

bool tree_reports::take(kind k, std::uint32_t aux, const multipart& p) {
  switch (k) {
    case kind::record:
      if (!record_ || p.size() != 4 || p[1].size() != 8 || p[2].size() != 8) return false;
      record_(static_cast<record_kind>(aux), p[0].to_string_view(), u64(p[1]), u64(p[2]), p[3].to_string_view());
      return true;
    case kind::pool_view:
      if (!take_pool_views_ || p.size() != 3 || p[0].size() != 8) return false;
      take_pool_views_(u64(p[0]), p[1].to_string_view(), p[2].to_string_view(), aux != 0);
      return true;
    case kind::record_batch:
      if (!take_records_ || p.size() != 4 || p[0].size() != 8 || p[1].size() != 8) return false;
      take_records_(u64(p[0]), u64(p[1]), p[2].to_string_view(), p[3].to_string_view());
      return true;
    default: return false;
  }
}

}  // namespace fiber::detail
