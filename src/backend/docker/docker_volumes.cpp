#include "backend/docker/docker_volumes.hpp"

#include <boost/json.hpp>

#include "backend/docker/docker_engine.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

void docker_volumes::remove(const std::string& name, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  engine_.call(engine_.request("DELETE", std::string(docker_engine::api) + "/volumes/" + percent_encode(name)), [d](const http_response&) { (*d)({}, true, {}); },
       docker_engine::forward_error(d));
}

void docker_volumes::create(const std::string& name, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  auto req = engine_.request("POST", std::string(docker_engine::api) + "/volumes/create");
  req.body = boost::json::serialize(boost::json::object{{"Name", name}});
  req.headers.emplace_back("Content-Type", "application/json");
  engine_.call(std::move(req), [d](const http_response&) { (*d)({}, true, {}); }, docker_engine::forward_error(d));
}

void docker_volumes::has(const std::string& name, done<bool> on_done) {
  engine_.exists("/volumes/" + percent_encode(name), "a volume", std::move(on_done));
}

}  // namespace fiber::detail
