// Calls to a manager's objects from any process: in the master through its service, in a worker
// through the proxies it was given (a client per manager that sends upstream and waits for the
// reply), and the object handles that release an object when the last proxy goes.
#include <unordered_map>

#include "core/log.hpp"
#include "core/message_limit.hpp"
#include "fiber/manager.hpp"
#include "primitives/manager/master.hpp"
#include "primitives/manager/wire.hpp"
#include "runtime/pending_calls.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

namespace {
class manager_client final : public service {
 public:
  manager_client(runtime& rt, std::uint64_t id) : rt_(rt), id_(id) {}

  std::shared_ptr<completion<message>> call(const object_ref& ref, std::uint64_t method, writer& args) {
    auto [id, c] = pending_.open();
    rt_.worker().send_upstream(
        make_message(manager_kind::call, {.channel = id_, .request = id, .flags = flag_expects_reply}, call_frames(ref, method, args)));
    return c;
  }

  void on_message(const std::string&, const header& h, multipart&& payload) override {
    auto c = pending_.take(h.request);
    if (!c) return;
    if (h.type == kind::service_gone) {
      c->set_error(std::make_exception_ptr(error(errc::server_lost, "manager " + std::to_string(id_) +
                                                                        " has been shut down: its objects are gone")));
      return;
    }
    complete_from_reply(*c, h.aux, std::move(payload));
  }

 private:
  runtime& rt_;
  std::uint64_t id_;
  pending_calls<message> pending_;
};

// A worker has one runtime; its clients live as long as the process.
std::unordered_map<std::uint64_t, std::shared_ptr<manager_client>>& worker_clients() {
  static auto* m = new std::unordered_map<std::uint64_t, std::shared_ptr<manager_client>>;
  return *m;
}
}  // namespace

std::shared_ptr<completion<message>> send_object_call(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                      writer& args) {
  if (auto over = message_limit_text("the call's arguments", args.total_size(), rt.cfg().max_message_bytes, "send less");
      !over.empty())
    return failed_call(errc::message_too_large, over);
  if (rt.is_shut_down()) return failed_call(errc::closed, "the fiber context has been stopped");
  if (rt.is_master()) {
    return call_at_master(rt, ref, method, args);
  }
  auto& clients = worker_clients();
  auto& client = clients[ref.manager];
  if (!client) {
    client = std::make_shared<manager_client>(rt, ref.manager);
    rt.services().add(ref.manager, client);
  }
  return client->call(ref, method, args);
}

std::shared_ptr<completion<message>> send_object_call_now(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                          writer& args) {
  if (rt.in_loop_thread() || rt.owns_loop()) {
    std::shared_ptr<completion<message>> c;
    rt.run_sync([&] { c = send_object_call(rt, ref, method, args); });
    return c;
  }
  // The caller's io_context, called from outside it: sent as soon as the loop runs.
  auto c = std::make_shared<completion<message>>();
  auto kept = std::make_shared<writer>(std::move(args));
  rt.run_soon([&rt, ref, method, kept, c] {
    auto inner = send_object_call(rt, ref, method, *kept);
    auto relay = [c, inner] {
      if (inner->error)
        c->set_error(inner->error);
      else
        c->set_value(std::move(*inner->value));
    };
    if (inner->done)
      relay();
    else
      inner->waiter = relay;
  });
  return c;
}


object_handle adopt_object(object_ref ref) {
  return object_handle{context::default_context().runtime(), ref, nullptr};
}

object_handle own_object(std::shared_ptr<runtime> rt, object_ref ref) {
  // When the last copy in this process goes, the server drops the object.
  std::weak_ptr<runtime> weak = rt;
  auto owner = std::shared_ptr<void>(nullptr, [weak, ref](void*) {
    auto rt = weak.lock();
    if (!rt || rt->is_shut_down()) return;
    // Sent before anything this thread does next, so a later call sees the object gone.
    try {
      rt->run_soon([weak, ref] {
        auto rt = weak.lock();
        if (!rt) return;
        writer none;
        none.value(std::tuple<>());
        (void)send_object_call(*rt, ref, release_method, none);  // nobody waits for the answer
      });
    } catch (const std::exception& e) {
      logf(log_level::warn, "releasing object ", ref.object, " of manager ", ref.manager, ": ", e.what());
    }
  });
  return object_handle{std::move(rt), ref, std::move(owner)};
}

}  // namespace fiber::detail
