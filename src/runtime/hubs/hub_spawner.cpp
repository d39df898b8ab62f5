#include "runtime/hubs/hub_spawner.hpp"

#include <asio/post.hpp>
#include <charconv>

#include "core/log.hpp"

namespace fiber::detail {

hub_spawner::hub_spawner(asio::io_context& io, std::unique_ptr<backend> children, tell_fn tell)
    : io_(io), backend_(std::move(children)), tell_(std::move(tell)) {}

hub_spawner::~hub_spawner() {
  for (auto& [start, child] : children_) child->kill_and_reap();
  children_.clear();
}

void hub_spawner::start(const std::string& start, std::string_view spec_text) {
  if (children_.contains(start)) return;  // said twice: the first stands
  std::unique_ptr<job> child;
  try {
    std::uint64_t parent = 0;
    auto spec = spawn_wire::decode_spec(spec_text, parent);
    // The master placed it by its cpu; on this host the hub's allocation is shared, not split.
    spec.cpu_declared = false;
    spec.host.clear();
    spec.whole_host = false;
    child = backend_->spawn(spec);
  } catch (const std::exception& e) {
    logf(log_level::error, "the hub cannot start a child: ", e.what());
    return tell(start, spawn_wire::event::exited, {.code = 127, .detail = e.what()});
  }
  auto* j = child.get();
  children_.emplace(start, std::move(child));
  j->when_identified([this, start, j] { tell(start, spawn_wire::event::identified, {.pid = j->pid()}); });
  j->when_running([this, start] { tell(start, spawn_wire::event::running, {}); });
  j->on_exit([this, start, j](int code) {
    tell(start, spawn_wire::event::exited,
         {.pid = j->pid(), .code = code, .detail = j->exit_detail(), .memory = j->memory_stopped()});
    // Not inside the job's own callback: erasing it destroys it.
    asio::post(io_, [this, start, alive = std::weak_ptr<int>(alive_)] {
      if (alive.lock()) children_.erase(start);
    });
  });
}

void hub_spawner::signal(const std::string& start, std::string_view signal_text) {
  int sig = 0;
  auto [end, ec] = std::from_chars(signal_text.data(), signal_text.data() + signal_text.size(), sig);
  if (ec != std::errc() || end != signal_text.data() + signal_text.size() || sig <= 0 || sig >= 65)
    return logf(log_level::error, "the master sent the hub a signal that is none ('", signal_text, "'); ignored");
  if (auto it = children_.find(start); it != children_.end()) it->second->signal(sig);
}

multipart hub_news(spawn_wire::event e, const spawn_wire::child_news& news) {
  auto event = std::to_string(static_cast<std::uint32_t>(e));
  auto text = spawn_wire::encode(news);
  multipart parts;
  parts.emplace_back(event.data(), event.size());
  parts.emplace_back(text.data(), text.size());
  return parts;
}

void hub_spawner::tell(const std::string& start, spawn_wire::event e, const spawn_wire::child_news& news) {
  tell_(start, hub_news(e, news));
}

}  // namespace fiber::detail
