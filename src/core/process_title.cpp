#include "core/process_title.hpp"

#include <cstring>

namespace fiber::detail {
namespace {
int saved_argc = 0;
char** saved_argv = nullptr;
}  // namespace

void remember_arguments(int argc, char** argv) noexcept {
  saved_argc = argc;
  saved_argv = argv;
}

std::string set_process_title(int argc, char** argv, std::string_view title) noexcept {
  if (argc <= 0 || !argv || !argv[0]) return {};
  // The arguments as the kernel laid them out: one after the other, each ended by a NUL. Only
  // that run is ours to write.
  char* begin = argv[0];
  char* end = argv[0] + std::strlen(argv[0]) + 1;
  for (int i = 1; i < argc && argv[i] == end; ++i) end = argv[i] + std::strlen(argv[i]) + 1;
  auto room = static_cast<std::size_t>(end - begin) - 1;  // the last NUL stays
  auto n = std::min(room, title.size());
  std::memcpy(begin, title.data(), n);
  std::memset(begin + n, 0, static_cast<std::size_t>(end - begin) - n);
  // Later arguments would still show (they were read from where they lay): none are left.
  for (int i = 1; i < argc; ++i) argv[i] = begin + n;
  return std::string(title.substr(0, n));
}

void name_this_process(std::string_view name) noexcept {
  if (!saved_argv || !saved_argv[0]) return;
  std::string_view program = saved_argv[0];
  if (auto slash = program.rfind('/'); slash != std::string_view::npos) program.remove_prefix(slash + 1);
  std::string title(name);
  title += ' ';
  title += program;
  set_process_title(saved_argc, saved_argv, title);
}

}  // namespace fiber::detail
