/// @file
/// Run a registered function in a child process.
///
///   void greet(std::string who);  FIBER_REMOTE(greet);
///   fiber::process p(&greet, "world");
///   p.start().get();  p.join().get();        // or co_await p.start(); co_await p.join();
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "fiber/context.hpp"
#include "fiber/op.hpp"
#include "fiber/registry.hpp"
#include "fiber/detail/export.hpp"

namespace fiber {

namespace detail {
class child_process;
}  // namespace detail

/// A registered function run in a child process, like multiprocessing.Process: start(), join(),
/// terminate(), its exit code and the exception its target threw.
class FIBER_API process {
 public:
  /// A child that will run `f(args...)`. Fails here, before anything starts, if `f` is not
  /// registered with FIBER_REMOTE.
  template <class R, class... P, class... A>
  explicit process(R (*f)(P...), A&&... args) : process(context::default_context(), f, std::forward<A>(args)...) {}

  /// As above, in `ctx`.
  template <class R, class... P, class... A>
  process(context& ctx, R (*f)(P...), A&&... args) : process(ctx, encode_call(f, std::forward<A>(args)...)) {}

  /// A lambda or other callable as the target: fiber's words at compile time.
  template <detail::unnamed_callable F, class... A>
    requires(!std::is_base_of_v<context, std::remove_cvref_t<F>> && !std::is_same_v<std::remove_cvref_t<F>, process> &&
             !std::is_same_v<std::remove_cvref_t<F>, detail::encoded_call>)
  explicit process(F&&, A&&...) {
    static_assert(detail::not_a_function<F>, FIBER_NOT_A_FUNCTION_MESSAGE);
  }
  /// A lambda or other callable as the target, in a context: fiber's words at compile time.
  template <detail::unnamed_callable F, class... A>
  process(context&, F&&, A&&...) {
    static_assert(detail::not_a_function<F>, FIBER_NOT_A_FUNCTION_MESSAGE);
  }
  /// Moves the child's ownership; the moved-from process owns none.
  process(process&&) noexcept;
  /// Takes `other`'s child; this one's is let go as the destructor does.
  process& operator=(process&&) noexcept;
  /// A child still running when its process object goes runs on, and the context waits for it
  /// when it ends (at exit, for the default context), as multiprocessing waits for non-daemon
  /// children; a daemon child is killed and reaped instead.
  ~process();

  /// Starts the child; completes once it has passed the handshake (binary, registry, keys).
  op<void> start();
  /// Waits for the child to end.
  op<void> join();
  /// Waits at most `timeout`; true when the child has ended.
  op<bool> join(std::chrono::milliseconds timeout);
  /// SIGTERM, then SIGKILL after terminate_grace_ms; completes when the child is gone.
  op<void> terminate();

  /// True from start() until the child has ended.
  bool is_alive() const noexcept;
  /// nullopt while not ended; the exit code, or -N when killed by signal N.
  std::optional<int> exitcode() const noexcept;
  /// After the child ended: the exception its target threw (type, message, process name), if any.
  std::optional<remote_error> exception() const;
  /// 0 before start.
  int pid() const noexcept;
  /// Its name (set_name, or "Process-N").
  const std::string& name() const noexcept;
  /// Before start only.
  void set_name(std::string name);
  /// As multiprocessing's `daemon`: a daemon child is killed when its process object goes or its
  /// context ends; a non-daemon one (the default) is waited for when its context ends. Before
  /// start only.
  void set_daemon(bool daemon);
  /// As set_daemon set it.
  bool daemon() const noexcept { return daemon_; }

 private:
  template <class R, class... P, class... A>
  static detail::encoded_call encode_call(R (*f)(P...), A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "fiber::process: wrong number of arguments for the function");
    static_assert((std::is_constructible_v<std::decay_t<P>, A&&> && ...),
                  "fiber::process: an argument cannot be converted to the function's parameter type");
    const auto& entry = detail::require_registered(f);
    detail::encoded_call call{entry.id, entry.name, {}};
    call.args.value(std::tuple<std::decay_t<P>...>(std::forward<A>(args)...));
    return call;
  }
  process(context& ctx, detail::encoded_call call);

  std::shared_ptr<detail::child_process> state_;
  bool daemon_ = false;
};

/// Who this process is (current_process()).
struct process_info {
  std::string name;        ///< "MainProcess" in the master, its name in a child
  int pid = 0;             ///< its pid
  bool is_worker = false;  ///< true in a child fiber started
};

/// This process: its name ("MainProcess" in the master) and pid.
FIBER_API process_info current_process();
/// Pids of the children of the default context that are still running.
FIBER_API std::vector<int> active_children();
/// Cpus this process may run on.
FIBER_API int cpu_count() noexcept;

}  // namespace fiber
