#include "core/build_id.hpp"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace fiber::detail {
namespace {
int find_build_id(dl_phdr_info* info, size_t, void* out) {
  // The first object is the executable itself.
  auto* result = static_cast<std::string*>(out);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    // The loader gives the object's base as an integer: the cast is the only way to its notes.
    auto* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);  // NOLINT(performance-no-int-to-ptr)
    auto* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      auto* name = p + sizeof(ElfW(Nhdr));
      auto* desc = name + ((note->n_namesz + 3) & ~3u);
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char hex[] = "0123456789abcdef";
        for (unsigned j = 0; j < note->n_descsz; ++j) {
          auto b = static_cast<unsigned char>(desc[j]);
          result->push_back(hex[b >> 4]);
          result->push_back(hex[b & 15]);
        }
        return 1;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return 1;  // only look at the executable
}
}  // namespace

const std::string& build_id() {
  static const std::string id = [] {
    std::string s;
    dl_iterate_phdr(find_build_id, &s);
    return s;
  }();
  return id;
}

const std::string& executable_path() {
  static const std::string path = [] {
    std::error_code ec;
    auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string("/proc/self/exe") : p.string();
  }();
  return path;
}
}  // namespace fiber::detail
