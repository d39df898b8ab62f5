// A small HTTP/1.1 server for a test's browser: files under one folder, and a few paths answered
// from the test's own table (a file elsewhere, or a text), on 127.0.0.1 at a port of the kernel's
// choosing. Each connection gets its own thread and one answer (Connection: close); GET only.
// Enough for a page and its scripts, and nothing a test must trust: it serves what it was given.
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fiber_test {

class static_http_server {
 public:
  /// Serves `root`'s files; `routes` first, where a path is named there.
  struct route {
    std::filesystem::path file;  // served when set
    std::string text;            // else this, as `type`
    std::string type = "application/json";
  };
  explicit static_http_server(std::filesystem::path root, std::map<std::string, route> routes = {})
      : root_(std::move(root)), routes_(std::move(routes)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("the test's HTTP server could not listen on 127.0.0.1");
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~static_http_server() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    ::close(fd_);
    std::lock_guard lock(mutex_);
    for (auto& t : connections_) t.join();
  }
  static_http_server(const static_http_server&) = delete;
  static_http_server& operator=(const static_http_server&) = delete;

  std::string url(const std::string& path = "/") const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  /// The paths asked for so far, in order.
  std::vector<std::string> asked() const {
    std::lock_guard lock(mutex_);
    return asked_;
  }

 private:
  void accept_loop() {
    while (!stopping_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (stopping_) return;
        continue;
      }
      std::lock_guard lock(mutex_);
      connections_.emplace_back([this, c] {
        serve(c);
        ::close(c);
      });
    }
  }

  static std::string type_of(const std::filesystem::path& p) {
    static const std::map<std::string, std::string> types = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript"}, {".css", "text/css"},
        {".json", "application/json"},         {".wasm", "application/wasm"}, {".png", "image/png"},
        {".svg", "image/svg+xml"},             {".woff2", "font/woff2"},     {".ttf", "font/ttf"}};
    auto it = types.find(p.extension().string());
    return it == types.end() ? "application/octet-stream" : it->second;
  }

  void serve(int c) {
    std::string head;
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
      auto n = ::read(c, buf, sizeof buf);
      if (n <= 0) return;
      head.append(buf, static_cast<std::size_t>(n));
    }
    auto sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos || head.compare(0, sp1, "GET") != 0)
      return answer(c, "405 Method Not Allowed", "text/plain", "GET only");
    auto path = head.substr(sp1 + 1, sp2 - sp1 - 1);
    if (auto q = path.find_first_of("?#"); q != std::string::npos) path.resize(q);
    {
      std::lock_guard lock(mutex_);
      asked_.push_back(path);
    }
    if (auto r = routes_.find(path); r != routes_.end()) {
      if (r->second.file.empty()) return answer(c, "200 OK", r->second.type, r->second.text);
      return send_file(c, r->second.file);
    }
    if (path.find("..") != std::string::npos) return answer(c, "404 Not Found", "text/plain", "no such file");
    auto file = root_ / (path == "/" ? std::string("index.html") : path.substr(1));
    send_file(c, file);
  }

  void send_file(int c, const std::filesystem::path& file) {
    int f = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (f < 0 || ::fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
      if (f >= 0) ::close(f);
      return answer(c, "404 Not Found", "text/plain", "no such file");
    }
    auto header = "HTTP/1.1 200 OK\r\nContent-Type: " + type_of(file) + "\r\nContent-Length: " +
                  std::to_string(st.st_size) + "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n";
    if (write_all(c, header.data(), header.size())) {
      off_t at = 0;
      while (at < st.st_size && ::sendfile(c, f, &at, static_cast<std::size_t>(st.st_size - at)) > 0) {
      }
    }
    ::close(f);
  }

  static void answer(int c, const std::string& status, const std::string& type, const std::string& body) {
    auto text = "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n" + body;
    write_all(c, text.data(), text.size());
  }
  static bool write_all(int c, const char* p, std::size_t n) {
    while (n > 0) {
      auto w = ::send(c, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }

  std::filesystem::path root_;
  std::map<std::string, route> routes_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  mutable std::mutex mutex_;
  std::vector<std::thread> connections_;
  std::vector<std::string> asked_;
};

}  // namespace fiber_test
