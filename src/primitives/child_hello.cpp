#include "primitives/child_hello.hpp"

#include <boost/json.hpp>

#include "core/build_id.hpp"
#include "core/same_secret.hpp"
#include "fiber/registry.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail {

child_hello read_child_hello(std::string_view text, std::string_view nonce, const std::string& name) {
  child_hello out;
  boost::json::object hello;
  try {
    hello = boost::json::parse(text).as_object();
  } catch (const std::exception& e) {
    out.problem = std::string("unreadable hello: ") + e.what();
    return out;
  }
  auto field = [&](const char* k) -> std::string {
    auto* v = hello.if_contains(k);
    return v && v->is_string() ? std::string(v->as_string()) : std::string();
  };
  if (!same_secret(field("nonce"), std::string(nonce))) {
    out.problem = "it did not say the one-time word its master gave " + name + " (another process linked with its id)";
    return out;
  }
  auto proto = hello.if_contains("protocol");
  if (!proto || !proto->is_int64() || proto->as_int64() != protocol_version) {
    out.problem = "worker speaks protocol " + (proto ? boost::json::serialize(*proto) : std::string("?")) + ", the master " +
                  std::to_string(protocol_version);
    return out;
  }
  if (field("build_id") != build_id() || field("registry") != std::to_string(registry_digest())) {
    out.problem = "worker binary " + field("executable") + " (build-id " + field("build_id") + ", registry " +
                  field("registry") + ") differs from the master's " + executable_path() + " (build-id " + build_id() +
                  ", registry " + std::to_string(registry_digest()) +
                  "); run the same build in workers: rebuild the image or redeploy the executable";
    out.code = errc::binary_mismatch;
    return out;
  }
  out.host = field("host");
  out.memory_domain = field("memory_domain");
  if (auto* pid = hello.if_contains("pid"); pid && pid->is_int64()) out.pid = static_cast<int>(pid->as_int64());
  return out;
}

}  // namespace fiber::detail
