#include "core/history_page.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <unordered_map>

namespace fiber::detail {

namespace {

/// `s` as HTML text (program names and reasons never become markup).
std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  return out;
}

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v >= 100 || v == static_cast<double>(static_cast<long long>(v)) ? "%.0f" : "%.1f", v);
  return b;
}

/// A time in words: "48.2 ms" under a second, "12.31 s" over.
std::string duration(double seconds) {
  char b[32];
  if (seconds < 1) std::snprintf(b, sizeof b, "%.1f ms", seconds * 1e3);
  else std::snprintf(b, sizeof b, "%.2f s", seconds);
  return b;
}

/// The SVG of one line over the bins: a polyline scaled to its top value, its values as data.
std::string plot(const char* id, const char* label, const std::vector<std::uint64_t>& values, double per, const char* colour,
                 const history_series& s, bool with_marks) {
  constexpr double width = 800, height = 200, pad = 8;
  double top = 1;
  for (auto v : values) top = std::max(top, static_cast<double>(v) * per);
  std::string points, data;
  for (std::size_t i = 0; i < values.size(); ++i) {
    double x = (static_cast<double>(i) + 0.5) * width / static_cast<double>(values.size());
    double y = height - pad - static_cast<double>(values[i]) * per / top * (height - 2 * pad);
    points += (i ? " " : "") + number(x) + "," + number(y);
    data += (i ? "," : "") + std::to_string(values[i]);
  }
  std::string svg = "<svg id=\"" + std::string(id) + "\" viewBox=\"0 0 800 200\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"" +
                    label + "\" data-from-ns=\"" + std::to_string(s.from_ns) + "\" data-bin-ns=\"" + std::to_string(s.bin_ns) +
                    "\"><polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2\" vector-effect=\"non-scaling-stroke\" points=\"" +
                    points + "\" data-values=\"" + data + "\"/>";
  if (with_marks)
    for (auto& m : s.failures) {
      auto x = static_cast<double>(m.ns - s.from_ns) / static_cast<double>(s.bin_ns * values.size()) * width;
      svg += "<line class=\"failure\" x1=\"" + number(x) + "\" x2=\"" + number(x) +
             "\" y1=\"0\" y2=\"200\" stroke=\"#c4320a\" stroke-dasharray=\"4 3\" vector-effect=\"non-scaling-stroke\"><title>" +
             escape(m.what) + "</title></line>";
    }
  return svg + "</svg><div class=\"muted\">top: " + number(top) + " " + label + "; from the run's start to " +
         duration(static_cast<double>(s.bin_ns * values.size()) / 1e9) + ", a point per " +
         duration(static_cast<double>(s.bin_ns) / 1e9) + "</div>";
}

std::string tile(const char* id, const char* label, std::uint64_t value) {
  return "<div class=\"tile\"><div class=\"label\">" + std::string(label) + "</div><div class=\"value\" id=\"" + id + "\">" +
         std::to_string(value) + "</div></div>";
}

}  // namespace

history_series series_of(const std::vector<read_record>& records, std::size_t bins) {
  history_series s;
  if (records.empty() || bins == 0) return s;
  std::uint64_t first = records.front().r.ns, last = first;
  for (auto& [r, text] : records) first = std::min(first, r.ns), last = std::max(last, r.ns);
  s.from_ns = first;
  s.bin_ns = std::max<std::uint64_t>(1, (last - first) / bins + 1);
  s.done.assign(bins, 0);
  s.workers.assign(bins, 0);
  std::uint64_t up = 0;
  std::vector<std::uint64_t> most(bins, 0), at_end(bins, 0);  // workers: the most up in a bin, and at its end
  std::vector<bool> changed(bins, false);
  std::unordered_map<std::uint32_t, std::string> names;
  auto bin = [&](std::uint64_t ns) { return std::min<std::size_t>(bins - 1, (ns - first) / s.bin_ns); };
  for (auto& [r, text] : records) {
    switch (r.kind) {
      case record_kind::name: names[r.a] = text; break;
      case record_kind::task_done: ++s.done[bin(r.ns)]; break;
      case record_kind::worker_up: ++up; break;
      case record_kind::worker_down:
        up -= std::min<std::uint64_t>(up, 1);
        if (r.d) s.failures.push_back({r.ns, names[r.a] + " died: " + text});
        break;
      case record_kind::task_lost: s.failures.push_back({r.ns, "task " + std::to_string(r.c) + " lost with its worker"}); break;
      case record_kind::task_timed_out: s.failures.push_back({r.ns, "task " + std::to_string(r.c) + " timed out"}); break;
      default: break;
    }
    if (r.kind == record_kind::worker_up || r.kind == record_kind::worker_down) {
      auto i = bin(r.ns);
      most[i] = std::max(most[i], up);
      at_end[i] = up;
      changed[i] = true;
    }
  }
  // A bin shows the most workers up in it: those it began with, or more after a start in it.
  std::uint64_t carried = 0;
  for (std::size_t i = 0; i < bins; ++i) {
    s.workers[i] = std::max(carried, most[i]);
    if (changed[i]) carried = at_end[i];
  }
  return s;
}

std::string history_page(const recorded_run& run, const std::vector<read_record>& records) {
  auto s = series_of(records);
  auto t = std::chrono::system_clock::to_time_t(run.began);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char began[32];
  std::strftime(began, sizeof began, "%Y-%m-%d %H:%M:%S UTC", &tm);
  std::string end = run.ended ? "ended" : "no end recorded (killed, or running)";
  if (run.truncated) end += "; the recording was cut at record_max_bytes";
  std::string page = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>fiber run )html" + escape(run.id) + R"html(</title>
<style>
  :root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --card:#fff; --bad:#c4320a; }
  body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
  header { display: flex; flex-wrap: wrap; gap: 16px; align-items: baseline; padding: 14px 20px; background: var(--card); border-bottom: 1px solid var(--line); }
  header h1 { font-size: 17px; margin: 0; }
  .muted { color: var(--muted); }
  main { padding: 16px 20px; display: grid; gap: 16px; }
  .tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(120px, 1fr)); gap: 10px; }
  .tile, section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
  .tile .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
  .tile .value { font-size: 24px; font-variant-numeric: tabular-nums; }
  section h2 { font-size: 15px; margin: 0 0 8px; }
  svg { width: 100%; height: 200px; display: block; }
  #failures li { color: var(--bad); }
</style>
</head>
<body>
<header>
  <h1>fiber run <span id="run">)html" + escape(run.id) + R"html(</span></h1>
  <span class="muted" id="program">)html" + escape(run.program) + R"html(</span>
  <span class="muted" id="backend">)html" + escape(run.backend) + R"html(</span>
  <span class="muted">began )html" + began + R"html(, ran )html" + duration(run.seconds) + R"html(</span>
  <span id="end">)html" + escape(end) + R"html(</span>
</header>
<main>
  <div class="tiles">)html" +
                     tile("tasks-done", "tasks done", run.tasks_done) + tile("tasks-sent", "tasks sent", run.tasks_sent) +
                     tile("tasks-lost", "lost with a worker", run.tasks_lost) +
                     tile("tasks-timed-out", "timed out", run.tasks_timed_out) +
                     tile("workers-started", "workers started", run.workers_started) +
                     tile("workers-lost", "workers lost", run.workers_lost) + tile("pools", "pools", run.pools) +
                     tile("maps", "maps", run.maps) + R"html(
  </div>
  <section>
    <h2>Tasks done per second</h2>
    )html" + plot("tasks", "tasks done / s", s.done, 1e9 / static_cast<double>(s.bin_ns), "#2f6fde", s, true) +
                     R"html(
  </section>
  <section>
    <h2>Workers</h2>
    )html" + plot("workers", "workers", s.workers, 1, "#027a48", s, true) + R"html(
  </section>
  <section>
    <h2>Failures (their items ran again, up to max_attempts)</h2>
    <ul id="failures">)html";
  if (s.failures.empty()) page += "<li class=\"muted\" style=\"color: var(--muted)\">none</li>";
  for (auto& f : s.failures)
    page += "<li>at " + duration(static_cast<double>(f.ns - s.from_ns) / 1e9) + ": " + escape(f.what) + "</li>";
  return page + "</ul>\n  </section>\n</main>\n</body>\n</html>\n";
}

}  // namespace fiber::detail
