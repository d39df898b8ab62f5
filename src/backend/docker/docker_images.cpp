#include "backend/docker/docker_images.hpp"

#include <boost/json.hpp>

#include "backend/docker/docker_engine.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

void docker_images::import_root(std::string tar, const std::string& repo_tag, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  auto colon = repo_tag.rfind(':');
  auto repo = repo_tag.substr(0, colon), tag = colon == std::string::npos ? "latest" : repo_tag.substr(colon + 1);
  auto req = engine_.request("POST", std::string(docker_engine::api) + "/images/create?fromSrc=-&repo=" + percent_encode(repo) +
                                 "&tag=" + percent_encode(tag));
  req.body = std::move(tar);
  req.headers.emplace_back("Content-Type", "application/x-tar");
  // The engine streams progress as JSON lines; an error shows up as {"error": ...} in them.
  engine_.call(std::move(req),
       [d](const http_response& r) {
         if (auto at = r.body.find("\"error\""); at != std::string::npos)
           return (*d)(make_error_code(errc::spawn_failed), false, "image import failed: " + r.body);
         (*d)({}, true, {});
       },
       docker_engine::forward_error(d));
}

void docker_images::has(const std::string& name, done<bool> on_done) {
  engine_.exists("/images/" + percent_encode(name) + "/json", "an image", std::move(on_done));
}

void docker_images::build(std::string context_tar, const std::string& repo_tag, const std::string& dockerfile,
                          unique_function<void(std::string_view)> on_output, done<std::string> on_done,
                          const std::vector<std::pair<std::string, std::string>>& build_args) {
  boost::json::object args;
  for (auto& [k, v] : build_args) args[k] = v;
  auto req = engine_.request("POST", std::string(docker_engine::api) + "/build?t=" + percent_encode(repo_tag) +
                                 "&dockerfile=" + percent_encode(dockerfile) + "&rm=1&forcerm=1" +
                                 (args.empty() ? "" : "&buildargs=" + percent_encode(boost::json::serialize(args))));
  req.body = std::move(context_tar);
  req.headers.emplace_back("Content-Type", "application/x-tar");
  auto id = std::make_shared<std::string>();
  auto out = std::make_shared<unique_function<void(std::string_view)>>(std::move(on_output));
  engine_.json_stream(
      std::move(req),
      [id, out](const boost::json::object& o) {
        if (auto* s = o.if_contains("stream"); s && s->is_string()) (*out)(s->as_string());
        if (auto* aux = o.if_contains("aux"); aux && aux->is_object())
          if (auto* v = aux->as_object().if_contains("ID"); v && v->is_string()) *id = v->as_string();
      },
      [id, on_done = std::move(on_done)](std::error_code ec, const std::string& why) mutable {
        if (ec) return on_done(ec, {}, "the image build failed: " + why);
        on_done({}, *id, {});
      });
}

void docker_images::tag(const std::string& image, const std::string& repo, const std::string& tag, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  engine_.call(engine_.request("POST", std::string(docker_engine::api) + "/images/" + percent_encode(image) + "/tag?repo=" + percent_encode(repo) +
                           "&tag=" + percent_encode(tag)),
       [d](const http_response&) { (*d)({}, true, {}); }, docker_engine::forward_error(d));
}

void docker_images::push(const std::string& repo, const std::string& tag, const std::string& registry_auth,
                         unique_function<void(std::string_view)> on_output, done<std::string> on_done) {
  if (engine_.plain_over_network() && !registry_auth.empty() && registry_auth != "e30")
    return on_done(make_error_code(errc::config_error), {}, engine_.plain_refusal("the registry's credentials"));
  auto req = engine_.request("POST", std::string(docker_engine::api) + "/images/" + percent_encode(repo) + "/push?tag=" + percent_encode(tag));
  req.headers.emplace_back("X-Registry-Auth", registry_auth.empty() ? "e30" : registry_auth);
  auto digest = std::make_shared<std::string>();
  auto out = std::make_shared<unique_function<void(std::string_view)>>(std::move(on_output));
  engine_.json_stream(
      std::move(req),
      [digest, out](const boost::json::object& o) {
        auto* status = o.if_contains("status");
        if (status && status->is_string()) {
          std::string line(status->as_string());
          if (auto* id = o.if_contains("id"); id && id->is_string()) line = std::string(id->as_string()) + ": " + line;
          // Layer progress repeats many times a second: only the states, not the bytes.
          auto* detail = o.if_contains("progressDetail");
          if (!detail || !detail->is_object() || detail->as_object().empty()) (*out)(line + "\n");
        }
        if (auto* aux = o.if_contains("aux"); aux && aux->is_object())
          if (auto* v = aux->as_object().if_contains("Digest"); v && v->is_string()) *digest = v->as_string();
      },
      [this, digest, repo, on_done = std::move(on_done)](std::error_code ec, const std::string& why) mutable {
        if (ec) return on_done(ec, {}, "pushing " + repo + " failed: " + why);
        if (digest->empty())
          return on_done(make_error_code(errc::spawn_failed), {},
                         "pushing " + repo + " through the Docker engine at " + engine_.host() + " reported no digest");
        on_done({}, *digest, {});
      });
}

void docker_images::inspect(const std::string& name, done<std::string> on_done) {
  auto d = std::make_shared<done<std::string>>(std::move(on_done));
  engine_.call(engine_.request("GET", std::string(docker_engine::api) + "/images/" + percent_encode(name) + "/json"),
       [d](http_response r) { (*d)({}, std::move(r.body), {}); }, docker_engine::forward_error(d));
}

}  // namespace fiber::detail
