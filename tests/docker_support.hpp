// The Docker side of the tests: an image made without any registry, and a blocking way to ask
// the engine things. Needs src/ on the include path.
#pragma once
#include <unistd.h>

#include <asio/io_context.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "backend/docker/docker_engine.hpp"

#include "run_folder.hpp"

namespace fiber_test {

/// A near-empty root: /usr, /lib, /bin come from the host through `volumes` (/usr bind-mounted
/// read-only); /sbin is a real directory so the engine can mount its init there.
inline constexpr const char* test_image = "fiber-test-root:latest";

template <class T>
struct outcome {
  std::error_code ec;
  T value{};
  std::string why;
};

/// Runs one engine operation to completion on `io`.
template <class T, class Start>
outcome<T> run_engine(asio::io_context& io, Start start) {
  std::optional<outcome<T>> out;
  start([&](std::error_code ec, T v, std::string why) { out = outcome<T>{ec, std::move(v), std::move(why)}; });
  io.restart();
  while (!out && io.run_one()) {
  }
  return out ? std::move(*out) : outcome<T>{std::make_error_code(std::errc::timed_out), {}, "never completed"};
}

inline std::string root_tar() {
  auto dir = fiber_test::run_folder() / ("fiber-root-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (auto d : {"usr", "etc", "tmp", "proc", "dev", "sys", "sbin"}) std::filesystem::create_directories(dir / d);
  for (auto [link, target] : {std::pair{"lib", "usr/lib"}, {"lib64", "usr/lib64"}, {"bin", "usr/bin"}})
    if (!std::filesystem::exists(dir / link)) std::filesystem::create_directory_symlink(target, dir / link);
  std::string cmd = "tar -C " + dir.string() + " -c .";
  std::string tar;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[65536];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) tar.append(buf, n);
    ::pclose(p);
  }
  std::filesystem::remove_all(dir);
  return tar;
}

/// Empty when the engine answers and has the test image (imported if missing); else why not.
inline std::string prepare_test_image(asio::io_context& io, fiber::detail::docker_engine& engine) {
  auto v = run_engine<std::string>(io, [&](auto done) { engine.check(std::move(done)); });
  if (v.ec) return v.why;
  auto has = run_engine<bool>(io, [&](auto done) { engine.images().has(test_image, std::move(done)); });
  if (has.ec) return has.why;
  if (has.value) return {};
  auto imported = run_engine<bool>(io, [&](auto done) { engine.images().import_root(root_tar(), test_image, std::move(done)); });
  return imported.ec ? "importing " + std::string(test_image) + ": " + imported.why : std::string();
}

/// fiber.master of the containers this process starts.
inline std::string master_label() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return std::string(name) + ":" + std::to_string(::getpid());
}

/// Ids of the containers (running or not) that master `owner` (a fiber.master value) started
/// and that still exist.
inline std::vector<std::string> containers_of(const std::string& owner) {
  asio::io_context io;
  fiber::detail::docker_engine engine(io);
  auto listed = run_engine<std::vector<std::string>>(
      io, [&](auto done) { engine.containers().list("fiber.master", owner, std::move(done)); });
  return listed.value;
}
inline std::vector<std::string> my_containers() { return containers_of(master_label()); }

}  // namespace fiber_test
