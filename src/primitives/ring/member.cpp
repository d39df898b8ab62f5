// A ring member's side: its calls to the master's rendezvous store, through the ring's upstream
// client (runtime/services/upstream_client.hpp).
#include <cstring>

#include "fiber/detail/completion.hpp"
#include "fiber/ring.hpp"
#include "primitives/ring/wire.hpp"
#include "runtime/runtime.hpp"
#include "runtime/services/upstream_client.hpp"

namespace fiber::detail {
namespace {

std::string first_frame(multipart&& reply) { return reply.empty() ? std::string() : reply[0].to_string(); }

/// loop: the store call `k` on ring `id`, from this member.
std::shared_ptr<completion<std::string>> store_call(runtime& rt, std::uint64_t id, kind k, std::uint32_t aux,
                                                    multipart&& frames) {
  if (rt.is_master())
    throw error(errc::not_started, "a ring_member's store is for the ring's members; the master holds the store itself");
  static const upstream_client<std::string>::traits traits{
      &first_frame, errc::closed, [](std::uint64_t) -> std::string { return "the ring is gone: its master let it go"; }};
  return upstream_client<std::string>::of(rt, id, traits).call(k, aux, std::move(frames));
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
      [rt, id = id_.ring, key = std::move(key), value = std::move(value)] {
        return detail::store_call(*rt, id, detail::ring_kind::set, 0, detail::frames_of(key, value, true));
      },
      [](std::string&&) {});
}

op<std::string> ring_member::get(std::string key, std::chrono::milliseconds timeout) const {
  auto rt = detail::member_runtime();
  auto ms = static_cast<std::uint32_t>(std::clamp<std::int64_t>(timeout.count(), 0, std::numeric_limits<std::uint32_t>::max()));
  return detail::deferred_op<std::string>(
      rt, [rt, id = id_.ring, key = std::move(key), ms] { return detail::store_call(*rt, id, detail::ring_kind::get, ms, detail::frames_of(key)); },
      [](std::string&& v) { return std::move(v); });
}

op<std::int64_t> ring_member::add(std::string key, std::int64_t delta) const {
  auto rt = detail::member_runtime();
  return detail::deferred_op<std::int64_t>(
      rt,
      [rt, id = id_.ring, key = std::move(key), delta] {
        std::string_view d(reinterpret_cast<const char*>(&delta), sizeof delta);
        return detail::store_call(*rt, id, detail::ring_kind::add, 0, detail::frames_of(key, d, true));
      },
      [](std::string&& v) { return detail::read_add_reply(v); });
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
