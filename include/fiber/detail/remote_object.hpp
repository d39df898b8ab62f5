// Objects hosted by a manager's server: the caller's handle, calls, and the server's side.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "fiber/codec.hpp"
#include "fiber/detail/channel.hpp"
#include "fiber/detail/completion.hpp"
#include "fiber/op.hpp"
#include "fiber/detail/export.hpp"

namespace fiber::detail {

/// Names one object of one manager; what travels when a proxy is passed to another process.
struct object_ref {
  std::uint64_t manager = 0;
  std::uint64_t object = 0;
  bool async = false;  // from an async_manager: calls are sent at once
};

/// What the copies of a proxy in one process share.
struct object_handle {
  std::shared_ptr<runtime> rt;
  object_ref ref;
  std::shared_ptr<void> owner;  // in the process that created the object: releases it when the last copy goes
};

// Method ids 0 and 1 are the server's own; a class's methods are stable_hash of their names.
inline constexpr std::uint64_t create_method = 0;
inline constexpr std::uint64_t release_method = 1;

/// On fiber's loop thread: sends `method(args)` to the object; the completion gets the result.
/// Never throws: a failure (server gone, payload too large) completes it with the error.
FIBER_API std::shared_ptr<completion<message>> send_object_call(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                      writer& args);
/// The handle a process gets for `ref` (decoded from a message, or just created).
FIBER_API object_handle adopt_object(object_ref ref);
FIBER_API object_handle own_object(std::shared_ptr<runtime> rt, object_ref ref);

template <class R>
R decode_result(const message& m) {
  if constexpr (std::is_void_v<R>) {
    (void)m;
  } else {
    return decode_message<R>(m);
  }
}

template <class R>
using result_decoder = R (*)(const message&);

/// Sends now from any thread (async_manager).
FIBER_API std::shared_ptr<completion<message>> send_object_call_now(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                          writer& args);
/// `method(args)` on the object: a manager's proxies complete the call when awaited; an
/// async_manager's send it now and complete when awaited.
template <class R>
op<R> call_object(const object_handle& h, std::uint64_t method, const std::shared_ptr<writer>& args,
                  result_decoder<R> decode = &decode_result<R>) {
  auto rt = h.rt;
  if (h.ref.async) {
    auto c = send_object_call_now(*rt, h.ref, method, *args);
    return deferred_op<R>(rt, [c] { return c; }, decode, std::source_location());  // sent already: not watched
  }
  // The handle's owner rides along: the object lives at least until the call is done.
  return deferred_op<R>(
      rt, [rt, ref = h.ref, method, args, owner = h.owner] { return send_object_call(*rt, ref, method, *args); }, decode);
}

/// Arguments as they travel: string literals become strings.
template <class A>
using wire_t = std::conditional_t<std::is_convertible_v<A, const char*> && !std::is_same_v<std::decay_t<A>, std::nullptr_t>,
                                  std::string, std::decay_t<A>>;

template <class... A>
std::shared_ptr<writer> encode_args(A&&... args) {
  auto keep = std::make_shared<std::tuple<wire_t<A>...>>(std::forward<A>(args)...);
  auto w = std::make_shared<writer>(keep);
  w->value(*keep);
  return w;
}

// ---- the server's side ----------------------------------------------------------------------

/// A call answered later (a queue's get that waits for a put).
class FIBER_API deferred_reply {
 public:
  deferred_reply(std::uint64_t manager, std::uint64_t call) : manager_(manager), call_(call) {}
  void send(writer& result) const;

 private:
  std::uint64_t manager_, call_;
};

/// An object living in a manager's server.
class hosted {
 public:
  virtual ~hosted() = default;
  /// Runs `method`: writes the result to `out` and returns true, or keeps `later` to answer
  /// through it and returns false. Throws what the method throws; an unknown method throws
  /// fiber::error(protocol_error).
  virtual bool call(std::uint64_t method, reader& args, writer& out, const deferred_reply& later) = 0;
  /// "class.method", as the run's recording names a call it samples.
  virtual std::string call_name(std::uint64_t method) const = 0;
};

}  // namespace fiber::detail
