#include "primitives/manager/wire.hpp"

#include "transport/message_frames.hpp"

namespace fiber::detail {


void complete_from_reply(completion<message>& c, std::uint32_t status, multipart&& payload) {
  if (status == reply_value) {
    auto f = message::frames::whole(std::move(payload));
    c.set_value(message(f));
    return;
  }
  c.set_error(reply_error(payload));
}

std::shared_ptr<completion<message>> failed_call(errc code, const std::string& what) {
  auto c = std::make_shared<completion<message>>();
  c->set_error(std::make_exception_ptr(error(code, what)));
  return c;
}

multipart call_frames(const object_ref& ref, std::uint64_t method, writer& args) {
  multipart m;
  std::uint64_t route[2] = {ref.object, method};
  m.emplace_back(route, sizeof route);
  for (auto& f : to_frames(args)) m.push_back(std::move(f));
  return m;
}

}  // namespace fiber::detail
