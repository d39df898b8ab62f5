#include "primitives/pool/shared_courier.hpp"

#include <algorithm>

#include "core/log.hpp"
#include "fiber/detail/shared_entry.hpp"
#include "primitives/pool/wire.hpp"
#include "transport/shared_frames.hpp"

namespace fiber::detail {

shared_courier::shared_courier(std::uint64_t pool_id, courier_directory& workers,
                               unique_function<void(const shared_entry&)> watch)
    : pool_id_(pool_id), workers_(workers), watch_(std::move(watch)) {}

shared_courier::attached shared_courier::attach(const courier_worker& w, const writer& args) {
  attached out;
  auto& held = held_[w.rid];
  // Objects gone since this worker got them go first: it lets them go before the task runs,
  // whether or not the posted release reached it yet.
  std::erase_if(held, [&](auto& h) {
    if (!h.second.expired()) return false;
    release_to(w, h.first);
    forget_host_copies(h.first);
    return true;
  });
  for (auto& e : args.shared_attached()) {
    if (std::find_if(held.begin(), held.end(), [&](auto& h) { return h.first == e->id(); }) != held.end()) continue;
    if (watched_.insert(e->id()).second && watch_) watch_(*e);
    bool large = e->bytes() >= host_memory_min_bytes;
    if (large && !host_memory_) {
      out.bytes += attach_for_remote_host(out.frames, w, e);
    } else {
      bool host = host_memory_ && large;
      bool copied = host && e->has_host_copy();
      try {
        out.bytes += append_shared(out.frames, *e, host);
      } catch (const std::exception& ex) {
        if (!host) throw;
        // No shared memory to be had (memfd): the object goes in the message, as to another host.
        logf(log_level::warn, "shared object ", e->id(), " goes to each worker in its messages: ", ex.what());
        out.bytes += append_shared(out.frames, *e, false);
      }
      if (host && !copied && e->has_host_copy()) bytes_host_ += e->bytes();
    }
    held.emplace_back(e->id(), e);
    ++out.count;
  }
  return out;
}

void shared_courier::delivered(const attached& a) noexcept {
  sent_ += a.count;
  bytes_sent_ += a.bytes;
}

void shared_courier::undelivered(const courier_worker& w, const attached& a) {
  auto& held = held_[w.rid];
  held.resize(held.size() - std::min(held.size(), a.count));  // the last attach added them
}

std::size_t shared_courier::held_by(const std::string& rid) const {
  auto it = held_.find(rid);
  return it == held_.end() ? 0 : it->second.size();
}

shared_courier::object_source* shared_courier::free_source(object_sources& src) {
  object_source* best = nullptr;
  for (auto& s : src.ready)
    if (s.serving < source_fanout && (!best || s.serving < best->serving)) best = &s;
  return best;
}

shared_courier::object_source* shared_courier::find_source(std::uint64_t id, const std::string& rid) {
  auto it = sources_.find(id);
  if (it == sources_.end()) return nullptr;
  for (auto& s : it->second.ready)
    if (s.rid == rid) return &s;
  return nullptr;
}

void shared_courier::fetch_from(multipart& out, const courier_worker& w, const shared_entry& e, object_source& from,
                                host_copy& st) {
  append_shared_from_peer(out, e, from.endpoint, from.public_key, workers_.has_mates(w));
  ++from.serving;
  st.source = from.rid;
  ++sources_[e.id()].inflight;
}

std::size_t shared_courier::attach_for_remote_host(multipart& out, const courier_worker& w,
                                                   const std::shared_ptr<const shared_entry>& e) {
  // One copy per memory domain: its first worker gets the object whole and, when it has mates,
  // copies it into its host's memory; the others map that copy, or wait until it is made.
  auto& st = host_copies_[{w.domain, e->id()}];
  if (!st.holder.empty()) {
    if (st.fd >= 0) {
      append_shared_host(out, *e, st.pid, st.fd);
    } else {
      append_shared_later(out, *e);
      st.waiting.push_back(w.rid);
    }
    return 0;
  }
  st.holder = w.rid;
  auto& src = sources_[e->id()];
  bool master_done = src.master_copies >= master_fanout;
  if (auto* from = master_done ? free_source(src) : nullptr) {
    fetch_from(out, w, *e, *from, st);
    return 0;
  }
  if (master_done && src.inflight) {
    append_shared_later(out, *e);  // a source is on its way
    src.pending.push_back(w.rid);
    return 0;
  }
  // Two hosts get their copies from the master at once, as fast as one copy each; another comes
  // from it only when no source is left.
  ++src.master_copies;
  ++src.inflight;
  return append_shared_frames(out, *e, workers_.has_mates(w), true);
}

std::shared_ptr<const shared_entry> shared_courier::entry_held(const std::string& rid, std::uint64_t id) const {
  auto it = held_.find(rid);
  if (it == held_.end()) return nullptr;
  for (auto& [h, e] : it->second)
    if (h == id) return e.lock();
  return nullptr;
}

void shared_courier::send_hosted(const std::string& rid, multipart&& m) {
  (void)workers_.send(rid, make_message(pool_kind::hosted, {.channel = pool_id_}, std::move(m)));
}

void shared_courier::send_whole(const courier_worker& w, std::uint64_t id, bool as_holder) {
  auto e = entry_held(w.rid, id);
  if (!e) {
    logf(log_level::error, w.name, " waits for shared object ", id, ", which is gone");
    return;
  }
  multipart m;
  auto bytes = as_holder ? append_shared_frames(m, *e, workers_.has_mates(w), true) : append_shared_frames(m, *e);
  if (!workers_.send(w.rid, make_message(pool_kind::hosted, {.channel = pool_id_}, std::move(m)))) bytes_sent_ += bytes;
}

void shared_courier::on_need(const courier_worker& w, std::uint64_t id) {
  // Its host copy or its fetch failed. The holder of a domain gets the master's copy and goes on
  // as its domain's holder; another worker gets one of its own.
  auto it = host_copies_.find({w.domain, id});
  bool holder = it != host_copies_.end() && it->second.holder == w.rid;
  if (holder && !it->second.source.empty()) {
    if (auto* from = find_source(id, it->second.source)) --from->serving;
    it->second.source.clear();
  }
  send_whole(w, id, holder);
}

void shared_courier::on_hosted(const courier_worker& w, const hosted_at& at, const std::string& server) {
  auto it = host_copies_.find({w.domain, at.id});
  if (it == host_copies_.end() || it->second.holder != w.rid) return;
  auto& st = it->second;
  auto& src = sources_[at.id];
  if (src.inflight) --src.inflight;
  if (!st.source.empty()) {
    if (auto* from = find_source(at.id, st.source)) --from->serving;
    st.source.clear();
  }
  if (auto nl = server.find('\n'); nl != std::string::npos)
    src.ready.push_back({w.rid, server.substr(0, nl), server.substr(nl + 1), 0});
  auto waiting = std::exchange(st.waiting, {});
  if (at.fd < 0) {
    // No host copy (none asked, or it could not): those waiting get the object itself, and the
    // next of the host tries again.
    host_copies_.erase(it);
    for (auto& rid : waiting)
      if (auto o = workers_.find(rid)) send_whole(*o, at.id, false);
  } else {
    st.pid = at.pid;
    st.fd = at.fd;
    for (auto& rid : waiting) {
      auto e = entry_held(rid, at.id);
      if (!e || !workers_.find(rid)) continue;
      multipart m;
      append_shared_host(m, *e, st.pid, st.fd);
      send_hosted(rid, std::move(m));
    }
  }
  serve_pending(at.id);
}

void shared_courier::serve_pending(std::uint64_t id) {
  auto sit = sources_.find(id);
  if (sit == sources_.end()) return;
  auto& src = sit->second;
  while (!src.pending.empty()) {
    auto* from = free_source(src);
    if (!from && src.inflight) return;  // the next source to be made serves them
    auto rid = src.pending.front();
    src.pending.erase(src.pending.begin());
    auto o = workers_.find(rid);
    if (!o) continue;
    auto hc = host_copies_.find({o->domain, id});
    if (hc == host_copies_.end() || hc->second.holder != rid) continue;
    if (!from) {  // no source left at all (they ended): the master's copy again
      ++src.inflight;
      send_whole(*o, id, true);
      continue;
    }
    auto e = entry_held(rid, id);
    if (!e) continue;
    multipart m;
    fetch_from(m, *o, *e, *from, hc->second);
    send_hosted(rid, std::move(m));
  }
}

void shared_courier::forget_host_copies(std::uint64_t id) {
  std::erase_if(host_copies_, [&](auto& kv) { return kv.first.second == id; });
  sources_.erase(id);
}

void shared_courier::on_worker_ended(const courier_worker& w) {
  if (!host_copies_.empty() || !sources_.empty()) on_holder_lost(w);
  held_.erase(w.rid);
}

void shared_courier::on_holder_lost(const courier_worker& w) {
  for (auto& [id, src] : sources_) {
    std::erase_if(src.ready, [&](auto& s) { return s.rid == w.rid; });
    std::erase(src.pending, w.rid);
  }
  std::vector<std::uint64_t> retry;
  for (auto it = host_copies_.begin(); it != host_copies_.end();) {
    auto& st = it->second;
    auto id = it->first.second;
    std::erase(st.waiting, w.rid);
    if (st.holder != w.rid) {
      ++it;
      continue;
    }
    if (st.fd < 0) {  // it was getting the object whole: not any more
      auto& src = sources_[id];
      if (src.inflight) --src.inflight;
      if (!st.source.empty())
        if (auto* from = find_source(id, st.source)) --from->serving;
    }
    retry.push_back(id);
    // Its copy goes with it (the mappings made stay). While none was made, the first of those
    // waiting gets the object whole instead, and makes the copy.
    std::optional<courier_worker> next;
    while (!next && st.fd < 0 && !st.waiting.empty()) {
      next = workers_.find(st.waiting.front());
      st.waiting.erase(st.waiting.begin());
    }
    if (!next) {
      auto waiting = std::move(st.waiting);
      it = host_copies_.erase(it);
      for (auto& rid : waiting)
        if (auto o = workers_.find(rid)) send_whole(*o, id, false);
      continue;
    }
    st.holder = next->rid;
    st.source.clear();
    ++sources_[id].inflight;
    send_whole(*next, id, true);
    ++it;
  }
  for (auto id : retry) serve_pending(id);
}

void shared_courier::release_to(const courier_worker& w, std::uint64_t id) {
  if (w.connected) (void)workers_.send(w.rid, make_message(pool_kind::release, {.channel = pool_id_}, as_pod(id)));
}

void shared_courier::released(std::uint64_t id) {
  watched_.erase(id);
  forget_host_copies(id);
  for (auto& [rid, held] : held_) {
    if (!std::erase_if(held, [&](auto& h) { return h.first == id; })) continue;
    if (auto w = workers_.find(rid)) release_to(*w, id);
  }
}

}  // namespace fiber::detail
