#include "runtime/worker_hello.hpp"

#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>

#include "core/build_id.hpp"
#include "fiber/registry.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {
namespace {
std::string this_host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Which processes can map this one's shared memory through /proc/<pid>/fd: those of the same
// host and process namespace. The host name alone does not say it (containers on the host's
// network share its name), nor the namespace alone (every machine's first one has the same
// number).
std::string memory_domain() {
  std::error_code ec;
  auto ns = std::filesystem::read_symlink("/proc/self/ns/pid", ec);
  return this_host_name() + "/" + (ec ? std::string("?") : ns.string());
}
}  // namespace

void send_hello(runtime& rt, const std::string& nonce) {
  boost::json::object hello{{"protocol", protocol_version},
                            {"build_id", build_id()},
                            {"registry", std::to_string(registry_digest())},
                            {"pid", ::getpid()},
                            {"host", this_host_name()},
                            {"memory_domain", memory_domain()},
                            {"executable", executable_path()},
                            {"nonce", nonce}};
  rt.worker().send_upstream(make_message(kind::hello, {}, boost::json::serialize(hello)));
}

fiber::config welcome_config(const multipart& welcome) {
  fiber::config cfg;
  auto snapshot = boost::json::parse(welcome.at(1).to_string_view());
  for (auto& [k, v] : snapshot.as_object()) cfg.set(k, std::string(v.as_string()));
  return cfg;
}

}  // namespace fiber::detail
