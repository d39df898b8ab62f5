#include "runtime/nested/nested_relay.hpp"

namespace fiber::detail {

relay relay_of(kind k) noexcept {
  switch (k) {
    case kind::hello:
    case kind::done:
    case kind::probe:
      return relay::here;
    case kind::put: return relay::channel_put;
    case kind::get: return relay::channel_get;
    case kind::cancel_get: return relay::cancel_get;
    case kind::maker_gone: return relay::maker_gone;
    case kind::record:
    case kind::record_batch:
    case kind::pool_view:
      return relay::as_is;
    // What a master sends down, never up: a child that sends one is answered as by a top master
    // (an unexpected kind, logged and ignored).
    case kind::welcome:
    case kind::refuse:
    case kind::item:
    case kind::cancelled:
    case kind::failure:
    case kind::service_gone:
      return relay::here;
  }
  return relay::here;  // a kind of no name: handle() says it is unexpected
}

multipart passed_up(kind k, std::uint32_t aux, multipart&& payload) {
  payload.insert(payload.begin(), make_header(k, 0, 0, aux));
  return std::move(payload);
}

}  // namespace fiber::detail
