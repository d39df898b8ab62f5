#include "runtime/claim_copy_service.hpp"

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "core/file_tree.hpp"
#include "core/same_secret.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "transport/http_server.hpp"

namespace fiber::detail {
namespace fs = std::filesystem;

namespace {

struct refused {
  int status;
  std::string why;
};

/// P of `?path=P` as a path below the claim: no absolute path, no "..".
fs::path below(const fs::path& root, const std::string& path) {
  fs::path out = root;
  std::size_t at = 0;
  while (at <= path.size()) {
    auto next = path.find('/', at);
    auto part = path.substr(at, next == std::string::npos ? std::string::npos : next - at);
    if (part == "..") throw refused{400, "the path " + path + " leaves the claim"};
    if (!part.empty() && part != ".") out /= part;
    if (next == std::string::npos) break;
    at = next + 1;
  }
  return out;
}

/// A refusal for a request whose head is not for this service; nullopt lets its body be read.
std::optional<http_reply> admit(const http_served_request& req, const std::string& token) {
  if (!same_secret(req.header("x-fiber-copy-token"), token))
    return http_reply{403, "this claim copy service answers only the fiber command that started it\n"};
  if (req.path() != "/tree") return http_reply{404, "no such endpoint: " + req.path() + " (GET or PUT /tree?path=P)\n"};
  if (req.method != "GET" && req.method != "PUT")
    return http_reply{405, req.method + " is not served (GET or PUT /tree?path=P)\n"};
  return std::nullopt;
}

/// Refuses a path whose folders below the claim pass through a link: what is read or written
/// stays in the claim whatever links a program of the run left in it.
void no_link_above(const fs::path& root, const fs::path& target) {
  std::error_code ec;
  auto at = root;
  for (const auto& part : target.parent_path().lexically_relative(root)) {
    if (part == ".") continue;
    at /= part;
    if (fs::is_symlink(fs::symlink_status(at, ec)))
      throw refused{409, "the link " + at.lexically_relative(root).string() + " in the claim is not followed"};
  }
}

http_reply answer(const http_served_request& req, const fs::path& root, std::uint64_t max_bytes) {
  auto asked = req.query("path");
  auto target = below(root, asked);
  std::error_code ec;
  if (req.method == "GET") {
    if (target != root) no_link_above(root, target);
    if (!fs::exists(fs::symlink_status(target, ec)))
      return {404, "no such file or folder in the claim: " + (asked.empty() ? "/" : asked) + "\n"};
    return {200, pack_tree(target, max_bytes), "application/octet-stream"};
  }
  if (req.method == "PUT") {
    if (target == root) return {400, "a copy into a claim needs a name to land under\n"};
    // Its folders, made as needed, but never through a link.
    auto at = root;
    for (const auto& part : target.parent_path().lexically_relative(root)) {
      if (part == ".") continue;
      at /= part;
      auto st = fs::symlink_status(at, ec);
      auto shown = at.lexically_relative(root).string();
      if (fs::is_symlink(st)) return {409, "cannot write through the link " + shown + " in the claim\n"};
      if (fs::exists(st) && !fs::is_directory(st)) return {409, shown + " in the claim is a file, not a folder\n"};
      if (!fs::exists(st) && !fs::create_directory(at, ec) && ec)
        return {409, "cannot make the folder " + shown + " in the claim: " + ec.message() + "\n"};
    }
    auto n = unpack_tree(req.body, target.parent_path(), target.filename().string());
    return {200, std::to_string(n) + " entries written\n"};
  }
  return {405, req.method + " is not served (GET or PUT /tree?path=P)\n"};  // admission let only these in
}

}  // namespace

bool is_claim_copy_service() noexcept { return std::getenv(env_claim_copy_port) != nullptr; }

int serve_claim_copies() {
  const char* port_text = std::getenv(env_claim_copy_port);
  const char* token_file = std::getenv(env_claim_copy_token_file);
  const char* root_text = std::getenv(env_claim_copy_root);
  std::string_view port_view = port_text ? port_text : "";
  int port = std::atoi(port_text ? port_text : "");  // 0: one the system picks (the service says which)
  std::string token;
  if (token_file && *token_file) {
    std::ifstream in(token_file);
    std::getline(in, token);
  }
  if (token.size() < 32 || port_view.empty() || port_view.find_first_not_of("0123456789") != std::string_view::npos ||
      port_view.size() > 5 || port > 65535) {
    std::fprintf(stderr, "fiber: %s and %s are for the fiber command's own use (fiber cp)\n", env_claim_copy_port,
                 env_claim_copy_token_file);
    return 2;
  }
  fs::path root = root_text && *root_text ? root_text : "/claim";
  std::uint64_t max_bytes = std::uint64_t{1} << 30;
  try {
    max_bytes = config::load().max_message_bytes;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fiber: %s\n", e.what());
    return 2;
  }

  asio::io_context io;
  asio::steady_timer idle(io);
  http_server* serving = nullptr;
  std::function<void()> rearm = [&] {
    idle.expires_after(std::chrono::seconds(claim_copy_idle_seconds));
    idle.async_wait([&](std::error_code ec) {
      if (ec) return;
      if (serving && serving->active() > 0) return rearm();  // a long copy still on its way
      io.stop();
    });
  };
  // A whole request may take an hour (1 GiB at under 1 MB/s): the command's own bound. An upload
  // goes to an unnamed file on the claim's own disk as it arrives, never whole into memory, and
  // only once its head carried the token.
  http_server_options options;
  options.max_body = max_bytes + 4096;
  options.client_timeout = std::chrono::seconds(3600);
  options.body_folder = root;
  http_server server(io, static_cast<std::uint16_t>(port), options,
                     [&](const http_served_request& req) { return admit(req, token); },
                     [&](const http_served_request& req) -> http_reply {
                       rearm();
                       try {
                         return answer(req, root, max_bytes);
                       } catch (const refused& r) {
                         return {r.status, r.why + "\n"};
                       } catch (const error& e) {
                         int status = e.code() == errc::message_too_large ? 413
                                      : e.code() == errc::malformed_message ? 400
                                                                            : 409;
                         return {status, e.reason() + "\n"};
                       }
                     });
  serving = &server;
  server.start();
  rearm();
  std::printf("%s at %s on port %d\n", claim_copy_ready_line, root.c_str(), static_cast<int>(server.port()));
  std::fflush(stdout);
  io.run();
  std::printf("fiber: no copy asked for %d s; the claim copy service ends\n", claim_copy_idle_seconds);
  return 0;
}

}  // namespace fiber::detail
