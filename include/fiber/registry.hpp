/// @file
/// Functions that may run in another process are registered by name.
///
///   int square(int x) { return x * x; }
///   FIBER_REMOTE(square);            // at namespace scope, once per program
///
/// Callers then pass plain function pointers (`fiber::process p(&square, 3)`); only the stable id
/// of the function travels, never a code address.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "fiber/codec.hpp"
#include "fiber/detail/export.hpp"

namespace fiber::detail {

using invoker_fn = void (*)(reader& args, writer& result);
/// Reads a call's arguments without making the call: the items of a pool chunk that ran before
/// its worker died still define the shared objects later items refer to.
using args_reader_fn = void (*)(reader& args);

struct function_entry {
  std::uint64_t id = 0;
  std::string name;  ///< fully qualified, with signature
  invoker_fn invoke = nullptr;
  args_reader_fn read_args = nullptr;
};

FIBER_API void register_function(const void* address, std::uint64_t id, std::string_view name, invoker_fn invoke,
                       args_reader_fn read_args);
FIBER_API const function_entry* find_function(const void* address) noexcept;
FIBER_API const function_entry* find_function(std::uint64_t id) noexcept;
/// The function's name as its source spells it ("ns::train"), from a registered name; the
/// registered name itself when it has no such part.
FIBER_API std::string_view spelled_name(std::string_view registered) noexcept;
/// Digest of every registered id: a worker whose registry differs runs other code.
FIBER_API std::uint64_t registry_digest() noexcept;
[[noreturn]] FIBER_API void throw_not_registered(const void* address);

/// The other kind of entry the registry holds: how a manager's server makes an object of a
/// registered class (fiber/remote_class.hpp) from its constructor's arguments. Constructors share
/// the functions' ids, duplicate check and digest.
class hosted;
using hosted_factory = std::unique_ptr<hosted> (*)(reader& args);
FIBER_API void register_constructor(std::uint64_t id, std::string_view signature, hosted_factory make);
FIBER_API hosted_factory find_constructor(std::uint64_t id) noexcept;
/// FNV-1a: ids that are the same in every process and every build of the same names.
constexpr std::uint64_t stable_hash(std::string_view s) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

template <class F>
struct fn_traits;
template <class R, class... P>
struct fn_traits<R (*)(P...)> {
  using result = R;
  using args = std::tuple<std::decay_t<P>...>;
  using params = std::tuple<P...>;
};
template <class R, class... P>
struct fn_traits<R (*)(P...) noexcept> : fn_traits<R (*)(P...)> {};

template <auto F>
constexpr std::string_view qualified_name() {
  // GCC/Clang spell the template argument, fully qualified, inside the function's name.
  return __PRETTY_FUNCTION__;
}

/// A decoded argument as the parameter `P` takes it: moved into a by-value or rvalue parameter
/// (so move-only types such as std::unique_ptr work), an lvalue for an lvalue reference.
template <class P, class A>
decltype(auto) as_parameter(A& a) {
  if constexpr (std::is_lvalue_reference_v<P>)
    return (a);
  else
    return std::move(a);
}
template <auto F, class Params, class Args, std::size_t... I>
decltype(auto) call_with(Args& args, std::index_sequence<I...>) {
  return F(as_parameter<std::tuple_element_t<I, Params>>(std::get<I>(args))...);
}

template <auto F>
void invoke(reader& in, writer& out) {
  using traits = fn_traits<decltype(F)>;
  using params = typename traits::params;
  auto args = in.value<typename traits::args>();
  if (!in.at_end()) throw error(errc::malformed_message, "arguments carry trailing bytes");
  auto order = std::make_index_sequence<std::tuple_size_v<params>>{};
  if constexpr (std::is_void_v<typename traits::result>) {
    call_with<F, params>(args, order);
  } else {
    out.value(call_with<F, params>(args, order));
  }
}

template <auto F>
void read_args_of(reader& in) {
  (void)in.value<typename fn_traits<decltype(F)>::args>();
}

template <auto F>
struct function_registrar {
  function_registrar() {
    auto name = qualified_name<F>();
    register_function(reinterpret_cast<const void*>(F), stable_hash(name), name, &invoke<F>, &read_args_of<F>);
  }
};

/// The entry of a registered function, or an error naming the function and the macro to add.
/// A registered function and its encoded arguments: what a child or a pool worker is asked to run.
struct encoded_call {
  std::uint64_t function_id = 0;
  std::string function_name;
  writer args;
};

template <class R, class... P>
const function_entry& require_registered(R (*f)(P...)) {
  const void* address = reinterpret_cast<const void*>(f);
  if (auto* e = find_function(address)) return *e;
  throw_not_registered(address);
}

}  // namespace fiber::detail

namespace fiber::detail {
/// For the static_assert of a callable that is not a plain function (FIBER_NOT_A_FUNCTION_MESSAGE).
template <class F>
inline constexpr bool not_a_function = false;
/// A callable fiber cannot send to another process: a class type with a call operator (a lambda,
/// std::function, a function object), not a function or a pointer to one.
template <class F>
concept unnamed_callable = std::is_class_v<std::remove_cvref_t<F>>;
}  // namespace fiber::detail

/// What passing a lambda, std::function or other callable where fiber runs a function in another
/// process fails to compile with, in place of a template deduction failure.
#define FIBER_NOT_A_FUNCTION_MESSAGE                                                                          \
  "fiber: another process runs a function by its registered name, so this must be a plain function "          \
  "registered with FIBER_REMOTE, passed as &f. A lambda, std::function or function object has no name "        \
  "another process could look up: move its body into a function f at namespace scope, add FIBER_REMOTE(f), " \
  "and pass &f (values it captured become f's parameters)"

/// A member `name` that takes any class-type callable and fails with FIBER_NOT_A_FUNCTION_MESSAGE
/// (the entry points of a pool that run a function in another process). What it returns
/// (fiber/op.hpp, which the class's header includes) takes any use, so that the message is the
/// compiler's only one.
#define FIBER_DETAIL_REFUSE_CALLABLE(name)                                             \
  template <::fiber::detail::unnamed_callable F, class... X>                           \
  ::fiber::detail::refused_call name(F&&, X&&...) {                                    \
    static_assert(::fiber::detail::not_a_function<F>, FIBER_NOT_A_FUNCTION_MESSAGE);   \
    return {};                                                                         \
  }

#define FIBER_DETAIL_CAT2(a, b) a##b
#define FIBER_DETAIL_CAT(a, b) FIBER_DETAIL_CAT2(a, b)

// `fn` stays unparenthesized: it must be a function's name, whose address is the registrar's
// template argument; `&(fn)` would accept expressions that name no function.
// NOLINTBEGIN(bugprone-macro-parentheses)
/// Registers a function so that it can run in another process. Use at namespace scope.
#define FIBER_REMOTE(fn) \
  [[maybe_unused]] static const ::fiber::detail::function_registrar<&fn> FIBER_DETAIL_CAT(fiber_remote_, __COUNTER__) {}
// NOLINTEND(bugprone-macro-parentheses)
