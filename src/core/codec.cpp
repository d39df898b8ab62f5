#include "fiber/codec.hpp"

#include <string>

#include "fiber/detail/shared_entry.hpp"

namespace fiber::detail {
void throw_malformed(const char* what, std::size_t need, std::size_t have) {
  throw error(errc::malformed_message, std::string("malformed message: ") + what + " needs " + std::to_string(need) +
                                           " but the message has " + std::to_string(have) +
                                           " (truncated input, or sender and receiver disagree on the type)");
}
}  // namespace fiber::detail

namespace fiber {
void writer::write_apart(const void* p, std::size_t n) {
  auto e = sharer_->share(p, n);
  if (!e) {  // not worth an object of its own: in the message, as any range (once, with share_ranges)
    referenced_ = false;
    try {
      range(p, n);
    } catch (...) {
      referenced_ = true;
      throw;
    }
    referenced_ = true;
    return;
  }
  attach_shared(e);
  pod(static_cast<std::uint64_t>(n) | detail::range_entry_bit);
  pod(e->id());
}
}  // namespace fiber
