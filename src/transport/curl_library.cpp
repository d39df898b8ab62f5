#include "transport/curl_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <mutex>
#include <string>

#include "fiber/error.hpp"

// The name the build's libcurl goes by at run time (its SONAME), from CMake.
#ifndef FIBER_CURL_SONAME
#define FIBER_CURL_SONAME "libcurl.so.4"
#endif

namespace fiber::detail {

namespace {
[[noreturn]] void cannot_load(const std::string& why) {
  throw error(errc::backend_unavailable,
              "libcurl (" FIBER_CURL_SONAME ") could not be loaded: " + why +
                  ". fiber talks to the Docker, Kubernetes and Slurm REST APIs through it: install it "
                  "(Debian and Ubuntu: apt-get install libcurl4; Fedora: dnf install libcurl)");
}

template <class F>
void resolve(void* handle, F& slot, const char* name) {
  void* f = ::dlsym(handle, name);
  if (!f) cannot_load(std::string("it has no function ") + name);
  slot = reinterpret_cast<F>(f);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's contract
}

curl_library load(void*& kept) {
  // RTLD_LOCAL: its symbols serve only these pointers, never a program's own libcurl calls.
  void* handle = ::dlopen(FIBER_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    cannot_load(why ? why : "dlopen failed");
  }
  kept = handle;
  curl_library lib{};
  resolve(handle, lib.global_init, "curl_global_init");
  resolve(handle, lib.easy_init, "curl_easy_init");
  resolve(handle, lib.easy_setopt, "curl_easy_setopt");
  resolve(handle, lib.easy_getinfo, "curl_easy_getinfo");
  resolve(handle, lib.easy_cleanup, "curl_easy_cleanup");
  resolve(handle, lib.easy_strerror, "curl_easy_strerror");
  resolve(handle, lib.multi_init, "curl_multi_init");
  resolve(handle, lib.multi_setopt, "curl_multi_setopt");
  resolve(handle, lib.multi_add_handle, "curl_multi_add_handle");
  resolve(handle, lib.multi_remove_handle, "curl_multi_remove_handle");
  resolve(handle, lib.multi_socket_action, "curl_multi_socket_action");
  resolve(handle, lib.multi_info_read, "curl_multi_info_read");
  resolve(handle, lib.multi_cleanup, "curl_multi_cleanup");
  resolve(handle, lib.multi_strerror, "curl_multi_strerror");
  resolve(handle, lib.slist_append, "curl_slist_append");
  resolve(handle, lib.slist_free_all, "curl_slist_free_all");
  if (auto rc = lib.global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK)
    cannot_load(std::string("curl_global_init failed: ") + lib.easy_strerror(rc));
  return lib;
}

struct loaded {
  std::once_flag once;
  curl_library lib{};
  void* handle = nullptr;
};
loaded& state() {
  static loaded s;
  return s;
}
}  // namespace

const curl_library& curl() {
  auto& s = state();
  // A failed load throws out of call_once, which leaves it to be tried again on the next call.
  std::call_once(s.once, [&] { s.lib = load(s.handle); });
  return s.lib;
}

std::string curl_file() {
  (void)curl();
  link_map* map = nullptr;
  if (::dlinfo(state().handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name || !*map->l_name)
    cannot_load("the loader does not say where it found it");
  return map->l_name;
}

}  // namespace fiber::detail
