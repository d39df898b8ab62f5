#include "runtime/observe/recording_handoff.hpp"

#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>

#include "core/log.hpp"
#include "runtime/observe/dashboard.hpp"
#include "transport/http_server.hpp"

namespace fiber::detail {

std::string handoff_line(const handoff_offer& offer) {
  return "fiber: the run's recording " + offer.file + " (" + std::to_string(offer.bytes) +
         " bytes) waits for fiber run on port " + std::to_string(offer.port);
}

std::optional<handoff_offer> handoff_in_line(std::string_view line) {
  static const std::regex pattern(
      R"(^fiber: the run's recording (\S+) \(([0-9]{1,15}) bytes\) waits for fiber run on port ([0-9]{1,5})$)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(line.begin(), line.end(), m, pattern)) return std::nullopt;
  auto port = std::stoi(m[3].str());
  if (port <= 0 || port > 65535 || m[1].str().find('/') != std::string::npos) return std::nullopt;
  return handoff_offer{m[1].str(), std::stoull(m[2].str()), static_cast<std::uint16_t>(port)};
}

bool hand_off_recording(const std::string& path, const std::string& token, std::chrono::milliseconds patience,
                        const std::function<void(const handoff_offer&)>& announce) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  auto file = std::make_shared<std::string>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file->empty()) return false;
  handoff_offer offer{std::filesystem::path(path).filename().string(), file->size(), 0};
  asio::io_context io;
  bool taken = false;
  http_server* server = nullptr;
  auto admit = [&](const http_served_request& r) -> std::optional<http_reply> {
    if (dashboard_token_matches(r.query("token"), token) && r.path() == "/recording") return std::nullopt;
    http_reply refusal;
    refusal.status = 403;
    refusal.body = "fiber: not the recording's taker\n";
    return refusal;
  };
  auto handler = [&](const http_served_request&) {
    http_reply reply;
    reply.content_type = "application/octet-stream";
    // Sent as a stream: asked for its next piece, the server has written the whole file.
    reply.stream = [file, sent = false, &taken, &server]() mutable -> asio::awaitable<std::string> {
      if (!sent) {
        sent = true;
        co_return *file;
      }
      // Written whole: no more takers; the connection closes after this, and the loop runs out.
      taken = true;
      server->close();
      co_return std::string();
    };
    return reply;
  };
  http_server listening(io, "0.0.0.0", 0, {}, admit, handler);
  server = &listening;
  listening.start();
  offer.port = listening.port();
  announce(offer);
  io.run_for(patience);
  if (!taken) log(log_level::warn, "the run's recording was not taken: it stays in this container, at " + path);
  return taken;
}

}  // namespace fiber::detail
