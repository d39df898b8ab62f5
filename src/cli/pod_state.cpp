#include "cli/pod_state.hpp"

#include "backend/kubernetes/pod_manifest.hpp"

namespace fiber::cli {
namespace json = boost::json;

const json::object* obj(const json::value* v) { return v && v->is_object() ? &v->as_object() : nullptr; }
const json::object* obj(const json::object* o, std::string_view key) { return o ? obj(o->if_contains(key)) : nullptr; }
const json::array* arr(const json::object* o, std::string_view key) {
  auto* v = o ? o->if_contains(key) : nullptr;
  return v && v->is_array() ? &v->as_array() : nullptr;
}
std::string str(const json::object* o, std::string_view key) {
  auto* v = o ? o->if_contains(key) : nullptr;
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}
std::int64_t num(const json::object* o, std::string_view key) {
  auto* v = o ? o->if_contains(key) : nullptr;
  return v && v->is_int64() ? v->as_int64() : 0;
}

pod_state state_of(const json::object& pod) {
  pod_state st;
  auto* status = obj(&pod, "status");
  st.phase = str(status, "phase");
  if (auto* conditions = arr(status, "conditions"))
    for (auto& c : *conditions) {
      auto* co = obj(&c);
      if (str(co, "type") == "PodScheduled" && str(co, "status") == "False" && str(co, "reason") == "Unschedulable") {
        st.unschedulable = true;
        st.reason = "Unschedulable: " + str(co, "message");
      }
    }
  if (auto* statuses = arr(status, "containerStatuses"))
    for (auto& cs : *statuses) {
      auto* state = obj(obj(&cs), "state");
      if (auto* waiting = obj(state, "waiting")) {
        auto message = str(waiting, "message");
        st.reason = str(waiting, "reason") + (message.empty() ? "" : ": " + message);
        st.hopeless = detail::kube::hopeless_waiting_reason(str(waiting, "reason"));
      } else if (obj(state, "running")) {
        st.started = true;
      } else if (auto* terminated = obj(state, "terminated")) {
        st.exit_code = static_cast<int>(num(terminated, "exitCode"));
        auto reason = str(terminated, "reason");
        if (!reason.empty() && reason != "Completed") st.reason = reason;
        // The runtime could not exec the program: it never ran (its message says why).
        st.started = !detail::kube::never_ran_reason(reason);
        if (!st.started) st.reason += ": " + str(terminated, "message");
        st.hopeless = !st.started;
      }
    }
  return st;
}

}  // namespace fiber::cli
