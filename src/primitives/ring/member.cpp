// A ring member's side: its calls to the master's rendezvous store (a client per ring that sends
// upstream and completes each call with the master's reply).
#include <cstring>
#include <unordered_map>

#include "fiber/detail/completion.hpp"
#include "fiber/ring.hpp"
#include "primitives/ring/wire.hpp"
#include "runtime/pending_calls.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {
namespace {

class ring_client final : public service {
 public:
  ring_client(runtime& rt, std::uint64_t id) : rt_(rt), id_(id) {}

  std::shared_ptr<completion<std::string>> call(kind k, std::uint32_t aux, multipart&& frames) {
    auto [request, c] = pending_.open();
    rt_.worker().send_upstream(
        make_message(k, {.channel = id_, .request = request, .aux = aux, .flags = flag_expects_reply}, std::move(frames)));
    return c;
  }

  void on_message(const std::string&, const header& h, multipart&& payload) override {
    auto c = pending_.take(h.request);
    if (!c) return;
    if (h.type == kind::service_gone)
      return c->set_error(std::make_exception_ptr(error(errc::closed, "the ring is gone: its master let it go")));
    if (h.aux == ring_reply_ok) return c->set_value(payload.empty() ? std::string() : payload[0].to_string());
    std::int32_t code = static_cast<std::int32_t>(errc::protocol_error);
    if (!payload.empty() && payload[0].size() == sizeof code) std::memcpy(&code, payload[0].data(), sizeof code);
    auto text = payload.size() > 1 ? payload[1].to_string() : std::string("the ring's store failed");
    c->set_error(std::make_exception_ptr(error(static_cast<errc>(code), text)));
  }

 private:
  runtime& rt_;
  std::uint64_t id_;
  pending_calls<std::string> pending_;
};

// A member has one runtime; its clients live as long as the process.
std::unordered_map<std::uint64_t, std::shared_ptr<ring_client>>& clients() {
  static auto* m = new std::unordered_map<std::uint64_t, std::shared_ptr<ring_client>>;
  return *m;
}

/// loop: the store call `k` on ring `id`, from this member.
std::shared_ptr<completion<std::string>> store_call(runtime& rt, std::uint64_t id, kind k, std::uint32_t aux,
                                                    multipart&& frames) {
  if (rt.is_master())
    throw error(errc::not_started, "a ring_member's store is for the ring's members; the master holds the store itself");
  auto& client = clients()[id];
  if (!client) {
    client = std::make_shared<ring_client>(rt, id);
    rt.services().add(id, client);
  }
  return client->call(k, aux, std::move(frames));
}

std::shared_ptr<runtime> member_runtime() { return context::default_context().runtime(); }

multipart frames_of(std::string_view a, std::string_view b = {}, bool two = false) {
  multipart m;
  m.emplace_back(a.data(), a.size());
  if (two) m.emplace_back(b.data(), b.size());
  return m;
}
}  // namespace
}  // namespace fiber::detail

namespace fiber {

op<void> ring_member::set(std::string key, std::string value) const {
  auto rt = detail::member_runtime();
  return detail::deferred_op<void>(
      rt,
      [rt, id = ring_, key = std::move(key), value = std::move(value)] {
        return detail::store_call(*rt, id, detail::ring_kind::set, 0, detail::frames_of(key, value, true));
      },
      [](std::string&&) {});
}

op<std::string> ring_member::get(std::string key, std::chrono::milliseconds timeout) const {
  auto rt = detail::member_runtime();
  auto ms = static_cast<std::uint32_t>(std::clamp<std::int64_t>(timeout.count(), 0, std::numeric_limits<std::uint32_t>::max()));
  return detail::deferred_op<std::string>(
      rt, [rt, id = ring_, key = std::move(key), ms] { return detail::store_call(*rt, id, detail::ring_kind::get, ms, detail::frames_of(key)); },
      [](std::string&& v) { return std::move(v); });
}

op<std::int64_t> ring_member::add(std::string key, std::int64_t delta) const {
  auto rt = detail::member_runtime();
  return detail::deferred_op<std::int64_t>(
      rt,
      [rt, id = ring_, key = std::move(key), delta] {
        std::string_view d(reinterpret_cast<const char*>(&delta), sizeof delta);
        return detail::store_call(*rt, id, detail::ring_kind::add, 0, detail::frames_of(key, d, true));
      },
      [](std::string&& v) {
        std::int64_t sum = 0;
        if (v.size() != sizeof sum) throw error(errc::malformed_message, "malformed ring add reply");
        std::memcpy(&sum, v.data(), sizeof sum);
        return sum;
      });
}

namespace {
std::pair<int, int> local_of(const ring_member& m) {
  auto text = m.get(detail::ring_local_key(m.rank())).get();
  auto comma = text.find(',');
  return {std::stoi(text.substr(0, comma)), std::stoi(text.substr(comma + 1))};
}
}  // namespace

int ring_member::local_rank() const { return local_of(*this).first; }
int ring_member::local_size() const { return local_of(*this).second; }

}  // namespace fiber
