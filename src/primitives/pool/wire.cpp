#include "primitives/pool/wire.hpp"

#include "fiber/error.hpp"

namespace fiber::detail {

void append_failed_item(writer& results, const remote_failure& f) {
  results.head().push_back(f.in_fiber ? item_failed : item_raised);
  auto text = f.encode();
  item_writer(results).add([&](writer& w) { w.bytes(text.data(), text.size()); });
}

}  // namespace fiber::detail
