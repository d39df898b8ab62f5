// A worker's calls to a service in its master (a manager's objects, a ring's store): the one
// client every service uses. Each call goes upstream flagged flag_expects_reply and completes
// with the service's reply, or with the service's own "gone" error when the master answers
// service_gone. A reply says how it went in its aux (runtime/services/service_reply.hpp). The client of a
// service is kept by the worker's service registry, so it lives as long as the runtime, and no
// longer.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "fiber/detail/completion.hpp"
#include "fiber/error.hpp"
#include "runtime/services/pending_calls.hpp"
#include "runtime/runtime.hpp"
#include "runtime/services/service_reply.hpp"

namespace fiber::detail {

template <class T>
class upstream_client final : public service {
 public:
  /// Turns a reply's value frames into the call's value; throws for a malformed reply.
  using read_fn = T (*)(multipart&&);
  struct traits {
    read_fn read;
    errc gone_code;                     // the error of a call whose service is gone
    std::string (*gone_text)(std::uint64_t id);  // ... and its words
  };

  /// The client of service `id` in this worker (made on first use); on the loop thread.
  static upstream_client& of(runtime& rt, std::uint64_t id, const traits& t) {
    return rt.services().keep<upstream_client>(id, [&] { return std::make_shared<upstream_client>(rt, id, t); });
  }

  upstream_client(runtime& rt, std::uint64_t id, traits t) : rt_(rt), id_(id), traits_(t) {}

  std::shared_ptr<completion<T>> call(kind k, std::uint32_t aux, multipart&& frames) {
    auto [request, c] = pending_.open();
    rt_.worker().send_upstream(
        make_message(k, {.channel = id_, .request = request, .aux = aux, .flags = flag_expects_reply}, std::move(frames)));
    return c;
  }

  bool serves_children() const noexcept override { return false; }

  void on_message(const std::string&, const header& h, multipart&& payload) override {
    auto c = pending_.take(h.request);
    if (!c) return;
    if (h.type == kind::service_gone) return c->set_error(std::make_exception_ptr(error(traits_.gone_code, traits_.gone_text(id_))));
    if (h.aux != reply_value) return c->set_error(reply_error(payload));
    try {
      c->set_value(traits_.read(std::move(payload)));
    } catch (...) {
      c->set_error(std::current_exception());
    }
  }

 private:
  runtime& rt_;
  std::uint64_t id_;
  traits traits_;
  pending_calls<T> pending_;
};

}  // namespace fiber::detail
