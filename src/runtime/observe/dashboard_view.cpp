#include "runtime/observe/dashboard_view.hpp"

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <vector>

namespace fiber::detail {
namespace {

std::uint64_t number(const boost::json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_uint64()) return v->as_uint64();
  if (v->is_int64()) return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v->as_int64()));
  return 0;
}

}  // namespace

dashboard_view::dashboard_view(std::string run, std::string program, std::string backend)
    : run_(std::move(run)), program_(std::move(program)), backend_(std::move(backend)) {}

void dashboard_view::add_pool(std::uint64_t id, describe_fn describe) { pools_[id].describe = std::move(describe); }

void dashboard_view::show_pool(std::uint64_t id, std::string_view tree, std::string_view state, bool ended) {
  boost::system::error_code ec;
  auto v = boost::json::parse(state, ec);
  if (ec || !v.is_object()) return;
  // A pool's first state goes up as it starts: an unknown one that says it ended was dropped from
  // the page already (older than the ended pools kept), its numbers in the totals.
  if (ended && !pools_.contains(id)) return;
  auto& p = pools_[id];
  if (p.said_ended) return;  // its last word was said
  // Its process's end may be seen before its last words arrive: they still bring its numbers.
  bool ended_already = p.ended;
  p.last = std::move(v.as_object());
  // Its id as text (a nested pool's carries its master's prefix in the high half: past what a
  // page's numbers hold exactly), its number in its own process, and where it runs.
  p.last["id"] = std::to_string(id);
  p.last["number"] = id & 0xffffffffu;
  p.last["in"] = tree;
  p.said_ended = ended;
  if (ended || ended_already) {
    p.ended = true;
    p.last["state"] = "ended";
  }
}

void dashboard_view::on_process(record_kind k, std::string_view name, std::uint64_t c, std::uint64_t d,
                                std::string_view text) {
  auto it = processes_.find(name);
  if (k == record_kind::process_start) {
    if (it == processes_.end()) it = processes_.emplace(std::string(name), process_entry{}).first;
    if (!it->second.running || it->second.order == 0) ++processes_running_;
    if (it->second.order != 0 && !it->second.running) --processes_ended_;  // a name used again
    it->second = {.pid = c, .running = true, .code = 0, .raised = {}, .order = ++process_events_};
    return;
  }
  if (k == record_kind::resources) {
    if (it != processes_.end() && it->second.running) it->second.resources = resources_text(c, d, text);
    return;
  }
  if (k != record_kind::process_end || it == processes_.end() || !it->second.running) return;
  // Its pools, if it was a master of its own, end with it, whatever they said last.
  for (auto& [id, p] : pools_)
    if (!p.describe && !p.ended)
      if (auto* in = p.last.if_contains("in"); in && in->is_string() && in->as_string() == name) {
        p.ended = true;
        p.last["state"] = "ended";
      }
  it->second.running = false;
  it->second.code = static_cast<std::int64_t>(c);
  it->second.raised = d == 1 ? std::string(text) : std::string();  // 2: fiber ended it (text: why)
  it->second.order = ++process_events_;
  --processes_running_;
  ++processes_ended_;
  // Ended ones beyond what the page lists go, the oldest first (a pool that replaced thousands
  // of workers would otherwise grow this without bound).
  auto ended = processes_.size() - processes_running_;
  if (ended > 2 * processes_listed) {
    std::vector<std::pair<std::uint64_t, std::string>> old;
    for (auto& [n, p] : processes_)
      if (!p.running) old.emplace_back(p.order, n);
    std::sort(old.begin(), old.end());
    for (std::size_t i = 0; i + processes_listed < old.size(); ++i) processes_.erase(old[i].second);
  }
}

void dashboard_view::on_memory(std::string_view name, std::uint64_t resident) {
  if (auto it = processes_.find(name); it != processes_.end() && it->second.running) it->second.resident = resident;
}

void dashboard_view::add_stats(totals& t, const boost::json::object& stats) const {
  t.queued += number(stats, "queued");
  t.running += number(stats, "running");
  t.done += number(stats, "done");
  t.retried += number(stats, "retried");
  t.workers += number(stats, "workers");
  t.workers_lost += number(stats, "workers_lost");
  t.workers_started += number(stats, "workers_started");
}

namespace {
/// The processes the page lists, at most `listed`: running ones first (oldest first), then the
/// newest ended, each with how it ended and what it raised.
template <class Processes>
boost::json::array process_rows(const Processes& processes, std::size_t listed_at_most) {
  using entry = typename Processes::mapped_type;
  std::vector<std::pair<const std::string*, const entry*>> listed;
  listed.reserve(processes.size());
  for (auto& [n, p] : processes) listed.emplace_back(&n, &p);
  // Only the first `listed_at_most` in order are shown: a thousand workers' list is not sorted
  // whole at every sample.
  auto shown = std::min(listed.size(), listed_at_most);
  std::partial_sort(listed.begin(), listed.begin() + static_cast<std::ptrdiff_t>(shown), listed.end(), [](auto& a, auto& b) {
    if (a.second->running != b.second->running) return a.second->running;
    return a.second->running ? a.second->order < b.second->order : a.second->order > b.second->order;
  });
  listed.resize(shown);
  boost::json::array rows;
  for (auto [n, p] : listed) {
    boost::json::object o{{"name", *n}, {"pid", p->pid}, {"state", p->running ? "running" : exit_text(p->code)}};
    if (!p->raised.empty()) o["raised"] = p->raised;
    if (!p->resources.empty()) o["resources"] = p->resources;
    if (p->running && p->resident) o["memory"] = std::to_string((p->resident + (1 << 20) - 1) >> 20) + " MB";
    rows.push_back(std::move(o));
  }
  return rows;
}
}  // namespace

dashboard_view::totals dashboard_view::refresh(bool rows) {
  totals sum = dropped_;
  for (auto& [id, p] : pools_) {
    if (!p.ended && p.describe) {  // a nested master's pool says its state itself (show_pool)
      if (auto state = p.describe(rows)) {
        if (rows) {
          p.last = std::move(*state);
        } else {  // its rows stay as last taken, for the page to see once it asks
          for (auto& [key, value] : *state) p.last[key] = std::move(value);
        }
      } else {
        p.ended = true;
        p.describe = nullptr;
        p.last["state"] = "ended";
        // Gone before any page asked for its rows: the page reads an empty list, not a missing one.
        if (!p.last.contains("workers")) {
          p.last["workers"] = boost::json::array{};
          p.last["workers_shown"] = 0;
          p.last["workers_total"] = 0;
        }
      }
    }
    if (auto* stats = p.last.if_contains("stats"); stats && stats->is_object()) {
      add_stats(sum, stats->as_object());
      // A pool that ended no longer has items queued or running, whatever it last said.
      if (p.ended) sum.queued -= number(stats->as_object(), "queued"), sum.running -= number(stats->as_object(), "running");
    }
  }
  // Only the newest ended pools stay listed; the older ones' numbers stay in the totals.
  std::size_t ended = 0;
  for (auto it = pools_.rbegin(); it != pools_.rend();) {
    if (it->second.ended && ++ended > ended_pools_kept) {
      if (auto* stats = it->second.last.if_contains("stats"); stats && stats->is_object()) {
        add_stats(dropped_, stats->as_object());
        dropped_.queued -= number(stats->as_object(), "queued");
        dropped_.running -= number(stats->as_object(), "running");
      }
      it = decltype(it)(pools_.erase(std::next(it).base()));
      continue;
    }
    ++it;
  }
  return sum;
}

void dashboard_view::tick() {
  using namespace std::chrono;
  double now = duration<double>(steady_clock::now() - began_).count();
  auto sum = refresh(false);
  double done_rate = 0, retried_rate = 0;
  if (last_ && now > last_->first) {
    double dt = now - last_->first;
    done_rate = static_cast<double>(sum.done - std::min(sum.done, last_->second.done)) / dt;
    retried_rate = static_cast<double>(sum.retried - std::min(sum.retried, last_->second.retried)) / dt;
  }
  last_ = {now, sum};
  history_.push_back({now, done_rate, retried_rate, sum.running, sum.queued});
  if (history_.size() > history_points) history_.pop_front();
}

boost::json::object dashboard_view::sample() {
  using namespace std::chrono;
  double now = duration<double>(steady_clock::now() - began_).count();
  auto sum = refresh(true);
  boost::json::array pools;
  for (auto& [id, p] : pools_) pools.push_back(p.last);
  double done_rate = history_.empty() ? 0 : history_.back().done_per_s;
  double retried_rate = history_.empty() ? 0 : history_.back().retried_per_s;

  boost::json::object out;
  out["run"] = run_;
  out["program"] = program_;
  out["backend"] = backend_;
  out["uptime_s"] = now;
  out["totals"] = {{"queued", sum.queued},   {"running", sum.running},           {"done", sum.done},
                   {"retried", sum.retried}, {"workers", sum.workers},           {"workers_lost", sum.workers_lost},
                   {"workers_started", sum.workers_started}};
  out["rates"] = {{"done_per_s", done_rate}, {"retried_per_s", retried_rate}};
  boost::json::array history;
  for (auto& p : history_)
    history.push_back(boost::json::array{p.t_s, p.done_per_s, p.retried_per_s, p.running, p.queued});
  out["history"] = std::move(history);
  out["pools"] = std::move(pools);

  out["processes"] = {{"running", processes_running_},
                      {"ended", processes_ended_},
                      {"list", process_rows(processes_, processes_listed)}};
  return out;
}

}  // namespace fiber::detail
