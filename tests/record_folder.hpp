// A folder of a test's own for the flight recorder's runs, and what the tests read back from it.
#pragma once
#include <fiber/fiber.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "run_folder.hpp"

namespace {
/// A folder of its own for a test's recordings, removed after.
struct record_folder {
  std::filesystem::path path;
  explicit record_folder(const char* name)
      : path(fiber_test::run_folder() / ("fiber-rec-" + std::to_string(::getpid()) + "-" + name)) {
    std::filesystem::remove_all(path);
  }
  ~record_folder() { std::filesystem::remove_all(path); }
  fiber::config cfg(std::vector<std::pair<std::string, std::string>> more = {}) const {
    more.emplace_back("record_dir", path.string());
    return fiber::config::load(more);
  }
  /// The last run recorded here as a trace (fiber::write_trace), its text.
  std::string last_trace(const fiber::config& cfg) const {
    auto out = (path / "last.trace.json").string();
    (void)fiber::write_trace("last", out, cfg);
    std::ifstream in(out);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::vector<std::filesystem::path> files() const {
    std::vector<std::filesystem::path> out;
    if (std::filesystem::exists(path))
      for (auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path());
    return out;
  }
};
}  // namespace
