/// @file
/// What a function needs from the machine that runs it.
///
///   void train(int seed);
///   FIBER_REMOTE(train);
///   FIBER_META(train, .cpu = 4, .memory_mb = 2000, .gpu = 1);
///
/// A process running `train`, and the workers of a pool that runs it, are started with these
/// needs; each backend turns them into what it can enforce (see docs/backends.md). A need left
/// at 0 takes the config's default (cpu_per_job, mem_per_job; no GPU).
#pragma once
#include <algorithm>
#include <cstdint>

#include "fiber/registry.hpp"
#include "fiber/detail/export.hpp"

namespace fiber {

/// What a function needs of the machine that runs it: FIBER_META(f, .cpu = 2, .gpu = 1) declares
/// it, and a pool or a process places the function's calls on workers that have it.
struct meta {
  int cpu = 0;        ///< cores
  int memory_mb = 0;  ///< MiB
  int gpu = 0;        ///< devices

  /// True when a worker started with these needs can run a function that needs `other`.
  constexpr bool covers(const meta& other) const noexcept {
    return cpu >= other.cpu && memory_mb >= other.memory_mb && gpu >= other.gpu;
  }
  /// The least needs that cover both.
  constexpr meta joined(const meta& other) const noexcept {
    return {std::max(cpu, other.cpu), std::max(memory_mb, other.memory_mb), std::max(gpu, other.gpu)};
  }
  /// Equal when every need is.
  friend constexpr bool operator==(const meta&, const meta&) = default;
};

namespace detail {
/// Keyed by the function's registry id, so FIBER_META and FIBER_REMOTE may sit in any order.
FIBER_API void register_meta(std::uint64_t function_id, meta needs);
FIBER_API meta find_meta(std::uint64_t function_id) noexcept;

template <auto F>
struct meta_registrar {
  explicit meta_registrar(meta needs) { register_meta(stable_hash(qualified_name<F>()), needs); }
};
}  // namespace detail

/// The needs declared for `f` with FIBER_META (all 0 when none were, or `f` is not registered).
template <class R, class... P>
meta meta_of(R (*f)(P...)) noexcept {
  auto* entry = detail::find_function(reinterpret_cast<const void*>(f));
  return entry ? detail::find_meta(entry->id) : meta{};
}

}  // namespace fiber

/// Declares what a registered function needs: FIBER_META(fn, .cpu = 2, .memory_mb = 512, .gpu = 1).
#define FIBER_META(fn, ...)                                                                   \
  [[maybe_unused]] static const ::fiber::detail::meta_registrar<&fn> FIBER_DETAIL_CAT(fiber_meta_, \
                                                                                  __COUNTER__) {  \
    ::fiber::meta { __VA_ARGS__ }                                                             \
  }
