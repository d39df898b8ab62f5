#include "runtime/worker_hello.hpp"

#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>

#include "core/build_id.hpp"
#include "fiber/registry.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {
namespace {
// What every worker of one fork server would find the same (its host, its process namespace):
// found once, in the fork server (prepare_hello_and_welcome), and inherited by each child it forks.
const std::string& this_host_name() {
  static const std::string name = [] {
    char buf[256] = {};
    ::gethostname(buf, sizeof buf - 1);
    return std::string(buf);
  }();
  return name;
}

// Which processes can map this one's shared memory through /proc/<pid>/fd: those of the same
// host and process namespace. The host name alone does not say it (containers on the host's
// network share its name), nor the namespace alone (every machine's first one has the same
// number).
const std::string& memory_domain() {
  static const std::string domain = [] {
    std::error_code ec;
    auto ns = std::filesystem::read_symlink("/proc/self/ns/pid", ec);
    return this_host_name() + "/" + (ec ? std::string("?") : ns.string());
  }();
  return domain;
}
}  // namespace

void prepare_hello_and_welcome() {
  (void)build_id();
  (void)executable_path();
  (void)memory_domain();
  (void)fiber::config::keys();  // the table of keys a welcome's config is read with
}

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
