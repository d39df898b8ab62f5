/// @file
/// Classes whose objects live in a manager's server process.
///
///   struct cartpole {
///     explicit cartpole(std::uint64_t seed);
///     std::vector<double> reset();
///     step_result step(int action);
///   };
///   FIBER_REMOTE_CLASS(cartpole, reset, step);   // at global namespace scope
///
///   fiber::proxy<cartpole> env = co_await mgr.create<cartpole>(7);
///   step_result r = co_await env.step(1);        // the proxy has the class's method names
///
/// Each method is called by name on the server; arguments and results travel with fiber::codec.
/// Overloaded methods cannot be listed (take the one you need through a differently named member).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fiber/codec.hpp"
#include "fiber/detail/remote_object.hpp"
#include "fiber/registry.hpp"

namespace fiber {

/// Specialized by FIBER_REMOTE_CLASS.
template <class T>
struct remote_class;

template <class T>
concept registered_class = requires { remote_class<T>::registered; };

namespace detail {

template <class M>
struct member_traits;
template <class R, class C, class... P>
struct member_traits<R (C::*)(P...)> {
  using result = R;
  using args = std::tuple<std::decay_t<P>...>;
};
template <class R, class C, class... P>
struct member_traits<R (C::*)(P...) const> : member_traits<R (C::*)(P...)> {};
template <class R, class C, class... P>
struct member_traits<R (C::*)(P...) noexcept> : member_traits<R (C::*)(P...)> {};
template <class R, class C, class... P>
struct member_traits<R (C::*)(P...) const noexcept> : member_traits<R (C::*)(P...)> {};

/// Server side: decodes the arguments, calls the member, encodes its result.
template <auto M, class T>
void invoke_member(T& object, reader& in, writer& out) {
  using traits = member_traits<decltype(M)>;
  auto args = in.value<typename traits::args>();
  if (!in.at_end()) throw error(errc::malformed_message, "arguments carry trailing bytes");
  auto call = [&](auto&... a) -> decltype(auto) { return (object.*M)(std::move(a)...); };
  if constexpr (std::is_void_v<typename traits::result>)
    std::apply(call, args);
  else
    out.value(std::apply(call, args));
}

/// An object of a registered class, on the server.
template <class T>
class hosted_object final : public hosted {
 public:
  template <class... A>
  explicit hosted_object(A&&... args) : value_(std::forward<A>(args)...) {}
  bool call(std::uint64_t method, reader& args, writer& out, const deferred_reply&) override {
    if (!remote_class<T>::dispatch(value_, method, args, out))
      throw error(errc::protocol_error, "the class has no method with id " + std::to_string(method) +
                                            ": the caller runs another build of it");
    return true;
  }
  std::string call_name(std::uint64_t method) const override {
    return std::string(remote_class<T>::name) + "." + std::string(remote_class<T>::method_name(method));
  }

 private:
  T value_;
};

template <class T, class... A>
std::unique_ptr<hosted> construct_hosted(reader& in) {
  auto args = in.value<std::tuple<A...>>();
  if (!in.at_end()) throw error(errc::malformed_message, "constructor arguments carry trailing bytes");
  return std::apply([](auto&... a) -> std::unique_ptr<hosted> { return std::make_unique<hosted_object<T>>(std::move(a)...); },
                    args);
}

template <class T, class... A>
constexpr std::string_view constructor_signature() {
  return __PRETTY_FUNCTION__;  // names T and A..., fully qualified
}

/// Registered in every process of the program by being instantiated in create<T>(args...): the
/// server, running the same executable, knows every constructor a caller can ask for.
template <class T, class... A>
struct constructor_id {
  static inline const std::uint64_t value = [] {
    auto signature = constructor_signature<T, A...>();
    auto id = stable_hash(signature);
    register_constructor(id, signature, &construct_hosted<T, A...>);
    return id;
  }();
};

/// What proxies of every kind share: a handle, and the codec that passes them to other processes.
class remote_object_base {
 public:
  remote_object_base() = default;
  explicit remote_object_base(object_handle h) : handle_(std::move(h)) {}
  const object_handle& fiber_handle() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_.rt != nullptr; }

 protected:
  template <class R>
  op<R> fiber_call(std::uint64_t method, std::shared_ptr<writer> args,
                   result_decoder<R> decode = &decode_result<R>) const {
    if (!handle_.rt) throw error(errc::not_started, "call through an empty proxy: get one from a manager first");
    return call_object<R>(handle_, method, std::move(args), decode);
  }

 private:
  object_handle handle_;
};

}  // namespace detail

/// A registered class's object in a manager's server; has the class's listed methods, each
/// returning op<R>.
template <class T>
class proxy : public detail::remote_object_base, public remote_class<T>::template methods<proxy<T>> {
  static_assert(registered_class<T>, "fiber::proxy<T>: T is not registered; add FIBER_REMOTE_CLASS(T, methods...) at global namespace scope");

 public:
  proxy() = default;
  /// A proxy on the object `h` names (manager::create makes these).
  explicit proxy(detail::object_handle h) : remote_object_base(std::move(h)) {}

  /// Used by the generated methods.
  template <auto M, class... A>
  auto fiber_invoke(std::uint64_t method, A&&... args) const {
    using traits = detail::member_traits<decltype(M)>;
    using R = typename traits::result;
    static_assert(std::tuple_size_v<typename traits::args> == sizeof...(A), "wrong number of arguments for this method");
    auto w = std::make_shared<writer>();
    w->value(typename traits::args(std::forward<A>(args)...));
    return this->template fiber_call<R>(method, std::move(w));
  }
};

/// Proxies travel to other processes as the object's name; calls from there go through the master.
template <class T>
struct codec<T, std::enable_if_t<std::is_base_of_v<detail::remote_object_base, T>>> {
  static void encode(writer& w, const T& v) {
    auto& r = v.fiber_handle().ref;
    w.pod(r.manager);
    w.pod(r.object);
    w.pod(static_cast<std::uint8_t>(r.async));
  }
  static T decode(reader& r) {
    detail::object_ref ref;
    ref.manager = r.pod<std::uint64_t>();
    ref.object = r.pod<std::uint64_t>();
    ref.async = r.pod<std::uint8_t>() != 0;
    return T(detail::adopt_object(ref));
  }
};

}  // namespace fiber

// ---- FIBER_REMOTE_CLASS ------------------------------------------------------------------------

#define FIBER_DETAIL_PARENS ()
#define FIBER_DETAIL_EXPAND(...) FIBER_DETAIL_EXPAND3(FIBER_DETAIL_EXPAND3(FIBER_DETAIL_EXPAND3(__VA_ARGS__)))
#define FIBER_DETAIL_EXPAND3(...) FIBER_DETAIL_EXPAND2(FIBER_DETAIL_EXPAND2(FIBER_DETAIL_EXPAND2(__VA_ARGS__)))
#define FIBER_DETAIL_EXPAND2(...) FIBER_DETAIL_EXPAND1(FIBER_DETAIL_EXPAND1(FIBER_DETAIL_EXPAND1(__VA_ARGS__)))
#define FIBER_DETAIL_EXPAND1(...) __VA_ARGS__
// Applies what(ctx, x) to each x (up to 81 of them).
#define FIBER_DETAIL_FOR_EACH(what, ctx, ...) \
  __VA_OPT__(FIBER_DETAIL_EXPAND(FIBER_DETAIL_FOR_EACH_STEP(what, ctx, __VA_ARGS__)))
#define FIBER_DETAIL_FOR_EACH_STEP(what, ctx, x, ...) \
  what(ctx, x) __VA_OPT__(FIBER_DETAIL_FOR_EACH_AGAIN FIBER_DETAIL_PARENS(what, ctx, __VA_ARGS__))
#define FIBER_DETAIL_FOR_EACH_AGAIN() FIBER_DETAIL_FOR_EACH_STEP

#define FIBER_DETAIL_PROXY_METHOD(T, m)                                                              \
  template <class... A>                                                                              \
  auto m(A&&... args) const {                                                                        \
    return static_cast<const Self&>(*this).template fiber_invoke<&T::m>(::fiber::detail::stable_hash(#m), \
                                                                        std::forward<A>(args)...);   \
  }
#define FIBER_DETAIL_NAME_METHOD(T, m) \
  if (method == ::fiber::detail::stable_hash(#m)) return #m;
#define FIBER_DETAIL_DISPATCH_METHOD(T, m)                     \
  if (method == ::fiber::detail::stable_hash(#m)) {            \
    ::fiber::detail::invoke_member<&T::m>(object, in, out);    \
    return true;                                               \
  }

/// Registers class T and the listed methods for managers; use at global namespace scope.
#define FIBER_REMOTE_CLASS(T, ...)                                                                       \
  template <>                                                                                            \
  struct fiber::remote_class<T> {                                                                        \
    [[maybe_unused]] static constexpr bool registered = true;                                            \
    static constexpr std::string_view name = #T;                                                         \
    static constexpr std::string_view method_name(std::uint64_t method) {                                \
      FIBER_DETAIL_FOR_EACH(FIBER_DETAIL_NAME_METHOD, T, __VA_ARGS__)                                    \
      return "?";                                                                                        \
    }                                                                                                    \
    template <class Self>                                                                                \
    struct methods {                                                                                     \
      FIBER_DETAIL_FOR_EACH(FIBER_DETAIL_PROXY_METHOD, T, __VA_ARGS__)                                   \
    };                                                                                                   \
    static bool dispatch(T& object, std::uint64_t method, ::fiber::reader& in, ::fiber::writer& out) {  \
      FIBER_DETAIL_FOR_EACH(FIBER_DETAIL_DISPATCH_METHOD, T, __VA_ARGS__)                               \
      (void)object, (void)in, (void)out;                                                                 \
      return false;                                                                                      \
    }                                                                                                    \
  }
