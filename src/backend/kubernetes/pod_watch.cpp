#include "backend/kubernetes/pod_watch.hpp"

#include <boost/json/parse.hpp>
#include <random>

#include "core/log.hpp"
#include "fiber/error.hpp"

namespace fiber::detail::kube {
namespace {

/// Watches end on the server's side after a random 5-10 minutes (as client-go's reflector asks),
/// and on ours a little later: a watch that has gone silent (a dropped connection nobody closed)
/// is noticed then.
int watch_seconds() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  return std::uniform_int_distribution<int>(300, 600)(rng);
}
constexpr auto silence_margin = std::chrono::seconds(30);

std::string name_of(const boost::json::object& pod) {
  if (auto* m = pod.if_contains("metadata"); m && m->is_object())
    if (auto* n = m->as_object().if_contains("name"); n && n->is_string()) return std::string(n->as_string());
  return {};
}
std::string rv_of(const boost::json::object& o) {
  if (auto* m = o.if_contains("metadata"); m && m->is_object())
    if (auto* v = m->as_object().if_contains("resourceVersion"); v && v->is_string()) return std::string(v->as_string());
  return {};
}

}  // namespace

pod_watch::pod_watch(asio::io_context& io, api& api, std::string ns, std::string label_selector)
    : io_(io), api_(api), ns_(std::move(ns)), selector_(std::move(label_selector)), retry_(io) {}

void pod_watch::start() { list(); }

void pod_watch::stop() {
  stopped_ = true;
  retry_.cancel();
  api_.cancel(std::exchange(stream_, 0));
}

void pod_watch::follow(const std::string& pod, on_change f) {
  if (!problem_.empty()) return f(nullptr, problem_);
  auto& slot = followed_[pod] = std::move(f);
  if (auto it = known_.find(pod); it != known_.end()) slot(&it->second, {});
}

void pod_watch::follow_others(on_any f) {
  if (!problem_.empty()) return f({}, nullptr, problem_);
  others_ = std::move(f);
  auto known = known_;  // it may follow by name from inside
  for (auto& [name, pod] : known)
    if (others_ && !followed_.contains(name)) others_(name, &pod, {});
}

void pod_watch::list() {
  if (stopped_) return;
  ++lists_;
  api_.call("GET", "/api/v1/namespaces/" + ns_ + "/pods?labelSelector=" + percent_encode(selector_), {},
            {"list", "pods"},
            [self = shared_from_this()](std::error_code ec, long status, boost::json::value body, const std::string& why) {
              if (self->stopped_) return;
              if (ec) return self->retry_later(why, status, /*listing=*/true);
              std::map<std::string, boost::json::object> now;
              if (auto* items = body.as_object().if_contains("items"); items && items->is_array())
                for (auto& item : items->as_array())
                  if (item.is_object()) now[name_of(item.as_object())] = item.as_object();
              self->rv_ = rv_of(body.as_object());
              // What vanished while nobody watched is gone; what is there is its latest state.
              auto before = std::move(self->known_);
              self->known_ = std::move(now);
              for (auto& [name, _] : before)
                if (!self->known_.contains(name)) self->deliver(name, nullptr);
              for (auto& [name, pod] : self->known_) self->deliver(name, &pod);
              self->watch();
            });
}

void pod_watch::watch() {
  if (stopped_) return;
  ++watches_;
  int seconds = watch_seconds();
  auto path = "/api/v1/namespaces/" + ns_ + "/pods?watch=1&allowWatchBookmarks=true&labelSelector=" +
              percent_encode(selector_) + "&resourceVersion=" + percent_encode(rv_) + "&timeoutSeconds=" + std::to_string(seconds);
  relist_ = false;
  stream_ = api_.stream(
      path, std::chrono::seconds(seconds) + silence_margin, {"watch", "pods"},
      [self = shared_from_this()](std::string_view text) { self->line(text); },
      [self = shared_from_this()](std::error_code ec, long status, const std::string& why) {
        self->stream_ = 0;
        if (self->stopped_) return;
        if (self->relist_) return self->list();
        if (status == 410) {  // Gone as the answer rather than as an event: the same
          self->rv_.clear();
          return self->list();
        }
        if (ec && ec != fiber::make_error_code(errc::timeout)) return self->retry_later(why, status, /*listing=*/false);
        self->failures_ = 0;
        self->watch();  // the server ended it (timeoutSeconds) or it went silent: go on from rv_
      });
}

void pod_watch::line(std::string_view text) {
  renewed_ = false;  // the server took the stream's token
  failures_ = 0;     // and the stream works
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return logf(log_level::warn, "the pod watch got a line that is not JSON: ", std::string(text.substr(0, 200)));
  auto& ev = v.as_object();
  auto* type = ev.if_contains("type");
  auto* obj = ev.if_contains("object");
  if (!type || !type->is_string() || !obj || !obj->is_object()) return;
  auto t = std::string_view(type->as_string());
  auto& o = obj->as_object();
  if (t == "ERROR") {
    // 410 Gone: the history the watch would resume from is compacted. List again.
    auto* code = o.if_contains("code");
    logf(log_level::debug, "the pod watch ended with ", status_message(*obj), "; listing again");
    if (code && code->is_int64() && code->as_int64() == 410) rv_.clear();
    relist_ = true;
    api_.cancel(stream_);
    return;
  }
  if (auto rv = rv_of(o); !rv.empty()) rv_ = rv;  // bookmarks too: resume from the newest
  if (t == "BOOKMARK") return;
  auto name = name_of(o);
  if (t == "DELETED") {
    known_.erase(name);
    return deliver(name, nullptr);
  }
  auto& slot = known_[name] = o;
  deliver(name, &slot);
}

void pod_watch::deliver(const std::string& name, const boost::json::object* pod) {
  auto it = followed_.find(name);
  if (it == followed_.end()) {
    if (auto f = others_) f(name, pod, {});
    return;
  }
  auto f = it->second;  // it may unfollow from inside
  f(pod, {});
}

void pod_watch::retry_later(const std::string& why, long status, bool listing) {
  if (status == 401 && !renewed_ && api_.where().tokens->can_renew()) {
    // The token rotated since it was last read (a watch reconnecting after its server ended it
    // has made no other request that would have noticed): the stream marked it refused, so
    // the next request reads it again.
    renewed_ = true;
    return list();
  }
  // A watch refused after the job's pods were listed: an API server that has just restarted (its
  // authorizer still loading) refuses for a few seconds what it allowed. The list waits that out
  // (api::outage_patience); refused still, or refused from the start, it does not mend by waiting:
  // every child hears of it.
  if (status == 401 || status == 403) {
    if (!listing && api_.granted({"list", "pods"})) return list();
    return give_up(why);
  }
  ++failures_;
  auto delay = std::chrono::milliseconds(std::min(200 << std::min(failures_, 8), 30000));
  logf(failures_ > 3 ? log_level::warn : log_level::debug, "the pod watch failed (", why, "); again in ", delay.count(), " ms");
  retry_.expires_after(delay);
  // A watch that broke (the API server restarted, the connection dropped) resumes from the last
  // resourceVersion it saw, as it does when the server ends it: nothing is listed again unless
  // that history is gone (410), which after a restart or a compaction of etcd it is.
  retry_.async_wait([self = shared_from_this(), listing](std::error_code ec) {
    if (ec || self->stopped_) return;
    if (listing || self->rv_.empty()) return self->list();
    self->watch();
  });
}

void pod_watch::give_up(const std::string& why) {
  problem_ = why;
  auto followed = followed_;
  for (auto& [name, f] : followed) f(nullptr, why);
  if (auto f = others_) f({}, nullptr, why);
}

}  // namespace fiber::detail::kube
