#include "fiber/registry.hpp"

#include "fiber/meta.hpp"
#include "core/demangle.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace fiber::detail {
namespace {
struct registry {
  std::mutex mutex;
  std::unordered_map<const void*, function_entry*> by_address;
  std::unordered_map<std::uint64_t, std::unique_ptr<function_entry>> by_id;
  std::unordered_map<std::uint64_t, meta> needs;
  struct constructor_entry {
    std::string signature;
    hosted_factory make;
  };
  std::unordered_map<std::uint64_t, constructor_entry> constructors;
};
registry& the_registry() {
  static registry* r = new registry;  // registrations run during static initialization
  return *r;
}
}  // namespace

std::string_view spelled_name(std::string_view registered) noexcept {
  // GCC: "... [with auto F = ns::train; ...]"; Clang: "... [F = &ns::train]".
  auto at = registered.find("F = ");
  if (at == std::string_view::npos) return registered;
  auto name = registered.substr(at + 4);
  name = name.substr(0, name.find_first_of(";]"));
  if (name.starts_with('&')) name.remove_prefix(1);
  return name;
}

void register_function(const void* address, std::uint64_t id, std::string_view name, invoker_fn invoke,
                       args_reader_fn read_args) {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.by_id.find(id);
  if (it != r.by_id.end()) {
    if (r.by_address.count(address)) return;  // the same function registered in two translation units
    std::fprintf(stderr, "fiber: two functions share the registry id of %.*s; rename one of them\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  auto e = std::make_unique<function_entry>(function_entry{id, std::string(name), invoke, read_args});
  r.by_address[address] = e.get();
  r.by_id.emplace(id, std::move(e));
}

const function_entry* find_function(const void* address) noexcept {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.by_address.find(address);
  return it == r.by_address.end() ? nullptr : it->second;
}

const function_entry* find_function(std::uint64_t id) noexcept {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.by_id.find(id);
  return it == r.by_id.end() ? nullptr : it->second.get();
}

void register_meta(std::uint64_t function_id, meta needs) {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  r.needs[function_id] = needs;
}

meta find_meta(std::uint64_t function_id) noexcept {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.needs.find(function_id);
  return it == r.needs.end() ? meta{} : it->second;
}

void register_constructor(std::uint64_t id, std::string_view signature, hosted_factory make) {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto [it, added] = r.constructors.emplace(id, registry::constructor_entry{std::string(signature), make});
  if (!added && it->second.signature != signature) {
    std::fprintf(stderr, "fiber: two constructors share the registry id of %.*s; rename the class\n",
                 static_cast<int>(signature.size()), signature.data());
    std::abort();
  }
}

hosted_factory find_constructor(std::uint64_t id) noexcept {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.constructors.find(id);
  return it == r.constructors.end() ? nullptr : it->second.make;
}

std::uint64_t registry_digest() noexcept {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::uint64_t> ids;
  ids.reserve(r.by_id.size());
  for (auto& [id, e] : r.by_id) ids.push_back(id);
  for (auto& [id, e] : r.constructors) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  std::uint64_t h = 1469598103934665603ull;
  for (auto id : ids) h = (h ^ id) * 1099511628211ull;
  return h;
}

void throw_not_registered(const void* address) {
  std::string name;
  Dl_info info{};
  if (dladdr(address, &info) && info.dli_sname) {
    name = demangle(info.dli_sname);
    if (auto paren = name.find('('); paren != std::string::npos) name.resize(paren);
  }
  char where[32];
  std::snprintf(where, sizeof where, "%p", address);
  // No name this program exports: a function of internal linkage (in an anonymous namespace,
  // or static), or a lambda turned into a pointer (+[]). Which one cannot be told from here.
  if (name.empty())
    throw error(errc::not_registered,
                std::string("function at ") + where +
                    " is not registered. If it is a function of yours f (in an anonymous namespace or declared "
                    "static, which is why its name cannot be shown), add FIBER_REMOTE(f) after it, in the same "
                    "file at namespace scope. If it is a lambda turned into a pointer with +[], move its body into a "
                    "function f at namespace scope, add FIBER_REMOTE(f), and pass &f");
  throw error(errc::not_registered, "function '" + name + "' is not registered: add FIBER_REMOTE(" + name +
                                        ") at namespace scope in one of your source files");
}
}  // namespace fiber::detail
