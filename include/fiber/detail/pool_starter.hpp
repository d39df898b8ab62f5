// How a pool's call becomes a submission (fiber/pool.hpp): the items' arguments encoded as the
// function's parameters read them, and each kind of call started the one way every call starts:
// the pool open, the function registered, a sink for its results, the submission on fiber's loop.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fiber/codec.hpp"
#include "fiber/detail/completion.hpp"
#include "fiber/detail/pool_core.hpp"
#include "fiber/detail/pool_sinks.hpp"
#include "fiber/op.hpp"
#include "fiber/pool_options.hpp"
#include "fiber/registry.hpp"

namespace fiber::detail {

/// What cancelling `c` (a pool call's completion) does: stops `sink`'s call. Weak, since the
/// sink holds the completion. On fiber's loop thread.
template <class C>
void cancel_through(C& c, const std::shared_ptr<pool_core>& core, const std::shared_ptr<pool_sink>& sink) {
  c.on_cancel = [core = std::weak_ptr<pool_core>(core), sink = std::weak_ptr<pool_sink>(sink)] {
    auto k = core.lock();
    auto s = sink.lock();
    if (k && s) k->cancel(*s);
  };
}

/// One argument, as the parameter type T reads it (the wire of a tuple of arguments is its
/// elements, one after the other). A T is written as it is. A reference_wrapper to one
/// (std::cref(v)) is nothing copied per item: its large data (a vector's elements) travels to
/// each worker once per call, however many items and chunks hold it, as a fiber::shared does;
/// the call copies it once. Anything else is converted.
template <class T, class U>
void encode_as(writer& w, const U& u) {
  if constexpr (std::is_same_v<U, T>)
    w.value(u);
  else if constexpr (std::is_same_v<U, std::reference_wrapper<T>> || std::is_same_v<U, std::reference_wrapper<const T>>)
    w.referenced([&] { w.value(u.get()); });
  else
    w.value(static_cast<T>(u));
}

/// Encodes one item as the argument tuple of a one-parameter function taking an A.
template <class A>
auto encode_one() {
  return [](writer& w, const auto& x) { encode_as<std::decay_t<A>>(w, x); };
}

/// Encodes one item of `owned`, a call's own vector of items (given to it by std::move), as
/// encode_one does; an item of the parameter's type is written with `owned` as its owner, so its
/// large ranges travel from where they are. A converted item is a temporary: it is copied.
template <class A, class T>
auto encode_owned(std::shared_ptr<const std::vector<T>> owned) {
  return [owned = std::move(owned), encode = encode_one<A>()](writer& w, const T& x) {
    if constexpr (std::is_same_v<std::decay_t<A>, T>)
      w.with_owner(owned, [&] { encode(w, x); });
    else
      encode(w, x);
  };
}

/// One element of a starmap item: one held by reference (a tuple<const std::vector<double>&, int>)
/// is written as a reference_wrapper is.
template <class T, class E, class U>
void encode_element(writer& w, const U& u) {
  if constexpr (std::is_lvalue_reference_v<E>)
    w.referenced([&] { encode_as<T>(w, u); });
  else
    encode_as<T>(w, u);
}

/// The arguments of one starmap item, for a function of parameters P.
template <class... P, class Tuple>
void encode_args(writer& w, const Tuple& t) {
  static_assert(std::tuple_size_v<Tuple> == sizeof...(P),
                "fiber::pool::starmap: each item must hold one value for each parameter of the function");
  if constexpr (std::tuple_size_v<Tuple> == sizeof...(P))
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (encode_element<std::decay_t<P>, std::tuple_element_t<I, Tuple>>(w, std::get<I>(t)), ...);
    }(std::index_sequence_for<P...>{});
}

/// A pool's calls, started: each checks first (pool open, function registered; both throw at the
/// call, on the caller's thread), then makes its sink and submits it on fiber's loop.
struct pool_starter {
  std::shared_ptr<runtime> rt;
  std::shared_ptr<pool_core> core;
  call_options options;

  template <class F>
  std::uint64_t checked(F f) const {
    core->check_open();
    return require_registered(f).id;
  }

  /// apply's start: copyable (an op keeps one per way of waiting), and the arguments, held
  /// shared, are moved once into the call that runs.
  template <class R, class... P, class... A>
  auto apply(R (*f)(P...), A&&... args) const {
    static_assert(sizeof...(P) == sizeof...(A), "fiber::pool::apply: wrong number of arguments for the function");
    using T = result_t<R>;
    using args_t = std::tuple<std::decay_t<P>...>;
    auto id = checked(f);
    auto held = std::make_shared<args_t>(std::forward<A>(args)...);
    return [core = core, id, held, opts = options]() {
      auto c = std::make_shared<completion<T>>();
      auto sink = std::make_shared<single_sink<T, args_t>>(std::move(*held), c);
      cancel_through(*c, core, sink);
      core->submit(id, 1, 1, sink, opts);
      return c;
    };
  }

  /// A map submitted now (the *_async calls).
  template <class T, class F, class It, class Encode>
  std::shared_ptr<completion<std::vector<T>>> submit_map(F f, It first, It last, std::size_t hint, std::size_t chunksize,
                                                         Encode encode) const {
    auto id = checked(f);
    auto c = std::make_shared<completion<std::vector<T>>>();
    auto sink = std::make_shared<map_sink<T, It, Encode>>(first, last, std::move(encode), c);
    core->on_loop([id, chunksize, hint, sink, c, core_ptr = core, opts = options](pool_core& k) {
      cancel_through(*c, core_ptr, sink);
      k.submit(id, chunksize, hint, sink, opts);
    });
    return c;
  }

  /// A map submitted when its op is first waited for.
  template <class T, class F, class It, class Encode>
  op<std::vector<T>> run_map(F f, It first, It last, std::size_t hint, std::size_t chunksize, Encode encode) const {
    auto id = checked(f);
    return deferred_op<std::vector<T>>(rt, [core = core, id, first, last, hint, chunksize, encode, opts = options]() {
      auto c = std::make_shared<completion<std::vector<T>>>();
      auto sink = std::make_shared<map_sink<T, It, Encode>>(first, last, encode, c);
      cancel_through(*c, core, sink);
      core->submit(id, chunksize, hint, sink, opts);
      return c;
    });
  }

  /// imap's sink, submitted now: at most `bound` results wait for the caller, chunks of at most
  /// `chunk_limit` where `chunksize` is 0.
  template <class T, class F, class It, class Encode>
  std::shared_ptr<stream_sink<T, It, Encode>> submit_stream(F f, It first, It last, std::size_t hint, std::size_t chunksize,
                                                            Encode encode, bool ordered, std::size_t bound,
                                                            std::size_t chunk_limit) const {
    auto id = checked(f);
    auto sink = std::make_shared<stream_sink<T, It, Encode>>(first, last, std::move(encode), ordered, bound, chunk_limit);
    core->on_loop([id, chunksize, hint, sink, opts = options](pool_core& k) { k.submit(id, chunksize, hint, sink, opts); });
    return sink;
  }
};

}  // namespace fiber::detail
