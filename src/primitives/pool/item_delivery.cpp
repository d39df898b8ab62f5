#include "primitives/pool/item_delivery.hpp"

#include "fiber/registry.hpp"

namespace fiber::detail {

std::string item_words(const pool_submission& sub, std::size_t index) {
  auto* f = find_function(sub.function_id);
  return "item " + std::to_string(index) + " (" + (f ? std::string(spelled_name(f->name)) : "a pool function") + ")";
}

bool item_delivery::fail_first(pool_task& t, std::exception_ptr e) {
  auto at = t.position();
  ++t.begin;
  error(*t.sub, at, std::move(e));
  return t.count() > 0;
}

void item_delivery::fail_items(pool_task& t, const std::exception_ptr& e) {
  while (t.count()) fail_first(t, e);
}

}  // namespace fiber::detail
