/// @file
/// Objects living in another process, called through proxies.
///
///   fiber::manager mgr;                                   // starts its server process
///   auto env = mgr.create<cartpole>(7).get();             // or co_await
///   auto r = env.step(1).get();                           // the call completes before get() returns
///
///   fiber::async_manager amgr;                            // same, but calls are sent at once:
///   auto env2 = amgr.create<cartpole>(7).get();
///   auto h1 = env2.step(1);  auto h2 = other.step(0);    // both on their way
///   auto r2 = co_await std::move(h2);  auto r1 = co_await std::move(h1);  // any order; each its own
///
/// One server process per manager runs its objects' methods one at a time, whichever object they
/// are for (a queue's get waits without blocking the others): calls an async_manager sends at once
/// queue at its server. Objects that must work at the same time each get a manager of their own. Exceptions thrown by a method come back as fiber::remote_error.
/// If the server dies, waiting and later calls fail with errc::server_lost. The server shuts down
/// when the manager is destroyed; an object is released when the last proxy to it in the process
/// that created it goes.
#pragma once
#include <memory>
#include <utility>

#include "fiber/context.hpp"
#include "fiber/managed.hpp"
#include "fiber/op.hpp"
#include "fiber/remote_class.hpp"
#include "fiber/detail/export.hpp"

namespace fiber {

namespace detail {
class manager_core;
/// On fiber's loop: asks the server for a new object (constructor `ctor` with `args`); the
/// completion gets the server's reply, which created_object turns into a handle.
FIBER_API std::shared_ptr<completion<message>> create_object(const std::shared_ptr<manager_core>& core, std::uint64_t ctor,
                                                   writer& args);
FIBER_API object_handle created_object(const std::shared_ptr<manager_core>& core, const message& reply);
}  // namespace detail

/// A server process holding objects that any process of the job calls through proxies, like
/// multiprocessing's Manager: made with create<T>() or the built-in list, dict, namespace and
/// queue. Each call waits for its answer (async_manager's do not).
class FIBER_API manager {
 public:
  /// Starts the server process (in the default context); calls made before it is up wait for it.
  manager();
  /// Starts the server process in `ctx`.
  explicit manager(context& ctx);
  /// Moves the server's ownership; the moved-from manager owns none.
  manager(manager&&) noexcept;
  /// Shuts this manager's server down and takes `other`'s.
  manager& operator=(manager&&) noexcept;
  /// Shuts the server down (it gets terminate_grace_ms to exit, then it is killed).
  ~manager();

  /// A new T on the server, built from `args`; T needs FIBER_REMOTE_CLASS.
  template <class T, class... A>
  op<proxy<T>> create(A&&... args) {
    static_assert(registered_class<T>,
                  "fiber::manager::create<T>: T is not registered; add FIBER_REMOTE_CLASS(T, methods...) at global "
                  "namespace scope");
    static_assert(std::is_constructible_v<T, detail::wire_t<A>&&...>,
                  "fiber::manager::create<T>: T has no constructor taking these arguments");
    auto ctor = detail::constructor_id<T, detail::wire_t<A>...>::value;
    return make<proxy<T>>(ctor, detail::encode_args(std::forward<A>(args)...));
  }
  /// A new, empty list on the server.
  template <class T>
  op<managed_list<T>> list() {
    return make<managed_list<T>>(detail::list_type, detail::encode_args());
  }
  /// A new, empty dict on the server.
  template <class K, class V>
  op<managed_dict<K, V>> dict() {
    return make<managed_dict<K, V>>(detail::dict_type, detail::encode_args());
  }
  /// A new, empty namespace (named values of any type) on the server.
  op<managed_namespace> make_namespace() { return make<managed_namespace>(detail::namespace_type, detail::encode_args()); }
  /// A new, empty queue on the server.
  template <class T>
  op<managed_queue<T>> queue() {
    return make<managed_queue<T>>(detail::queue_type, detail::encode_args());
  }

  /// Completes once the server process has started.
  op<void> ready();
  /// Stops the server now; its objects are gone and calls fail with errc::server_lost.
  op<void> shutdown();
  /// The server's pid (0 before it started).
  int pid() const;

 protected:
  /// A manager whose proxies wait for each answer, or (`async`) return it as an op.
  manager(context& ctx, bool async);

 private:
  template <class P>
  op<P> make(std::uint64_t ctor, const std::shared_ptr<writer>& args) {
    return detail::deferred_op<P>(
        rt_, [core = core_, ctor, args] { return detail::create_object(core, ctor, *args); },
        [core = core_](const detail::message& reply) { return P(detail::created_object(core, reply)); });
  }

  std::shared_ptr<detail::runtime> rt_;
  std::shared_ptr<detail::manager_core> core_;
};

/// A manager whose proxies send each call at once and return a handle (op) to await later.
class FIBER_API async_manager : public manager {
 public:
  /// Starts the server process in the default context.
  async_manager();
  /// Starts the server process in `ctx`.
  explicit async_manager(context& ctx);
};

}  // namespace fiber
