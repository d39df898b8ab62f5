// Calls to a manager's objects from any process: in the master through its service, in a worker
// through the proxies it was given (the manager's upstream client, runtime/services/upstream_client.hpp), and the object handles that release an object when the last proxy goes.
#include "core/log.hpp"
#include "core/message_limit.hpp"
#include "fiber/manager.hpp"
#include "primitives/manager/master.hpp"
#include "primitives/manager/wire.hpp"
#include "runtime/runtime.hpp"
#include "runtime/services/upstream_client.hpp"

namespace fiber::detail {

namespace {
message whole_reply(multipart&& reply) { return message(message::frames::whole(std::move(reply))); }
std::string gone_words(std::uint64_t manager) {
  return "manager " + std::to_string(manager) + " has been shut down: its objects are gone";
}
}  // namespace

std::shared_ptr<completion<message>> send_object_call(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                      writer& args) {
  if (auto over = message_limit_text("the call's arguments", args.total_size(), rt.cfg().max_message_bytes, "send less");
      !over.empty())
    return failed_call(errc::message_too_large, over);
  if (rt.is_shut_down()) return failed_call(errc::closed, "the fiber context has been stopped");
  // Its server is this process's child (this is the master, or a child that made the manager):
  // called here; else through the master above, which is its server's (or forwards to it).
  if (rt.is_master() || manager_here(rt, ref.manager)) {
    return call_at_master(rt, ref, method, args);
  }
  static const upstream_client<message>::traits traits{&whole_reply, errc::server_lost, &gone_words};
  return upstream_client<message>::of(rt, ref.manager, traits).call(manager_kind::call, 0, call_frames(ref, method, args));
}

std::shared_ptr<completion<message>> send_object_call_now(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                          writer& args) {
  if (rt.loop().in_loop_thread() || rt.loop().owns_loop()) {
    std::shared_ptr<completion<message>> c;
    rt.loop().run_sync([&] { c = send_object_call(rt, ref, method, args); });
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
    auto live = weak.lock();
    if (!live || live->is_shut_down()) return;
    // Sent before anything this thread does next, so a later call sees the object gone.
    try {
      live->run_soon([weak, ref] {
        auto on_loop = weak.lock();
        if (!on_loop) return;
        writer none;
        none.value(std::tuple<>());
        (void)send_object_call(*on_loop, ref, release_method, none);  // nobody waits for the answer
      });
    } catch (const std::exception& e) {
      logf(log_level::warn, "releasing object ", ref.object, " of manager ", ref.manager, ": ", e.what());
    }
  });
  return object_handle{std::move(rt), ref, std::move(owner)};
}

}  // namespace fiber::detail
