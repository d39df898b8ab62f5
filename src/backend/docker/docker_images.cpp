// docker_engine's images, volumes and archives: build, tag, push and inspect images, make and find
// volumes, and copy files into and out of containers (the `fiber` command's needs, mostly).
#include <boost/json.hpp>

#include "backend/docker/docker_engine.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

void docker_engine::json_stream(http_request req, unique_function<void(const boost::json::object&)> on_object,
                                unique_function<void(std::error_code, std::string)> on_done) {
  struct state {
    std::string partial, failure;
    boost::json::stream_parser parser;
    unique_function<void(const boost::json::object&)> on_object;
  };
  auto st = std::make_shared<state>();
  st->on_object = std::move(on_object);
  auto what = req.method + " " + req.url.substr(base_url_.size());
  req.timeout = std::chrono::milliseconds(0);  // builds and pushes take as long as they take
  // The engine writes one JSON object after another, not always one per line: a streaming parser
  // takes them as they complete.
  auto feed = [st](std::string_view chunk) {
    st->partial.append(chunk);
    std::size_t used = 0;
    while (used < st->partial.size()) {
      boost::system::error_code ec;
      auto n = st->parser.write_some(st->partial.data() + used, st->partial.size() - used, ec);
      used += n;
      if (ec) {
        st->failure = "unreadable progress from the engine: " + st->partial.substr(0, 200);
        used = st->partial.size();
        break;
      }
      if (!st->parser.done()) break;
      auto v = st->parser.release();
      st->parser.reset();
      if (!v.is_object()) continue;
      auto& o = v.as_object();
      if (auto* e = o.if_contains("error"); e && e->is_string() && st->failure.empty())
        st->failure = std::string(e->as_string());
      st->on_object(o);
    }
    st->partial.erase(0, used);
  };
  http_.start(std::move(req),
              [this, st, what, on_done = std::move(on_done)](std::error_code ec, http_response r) mutable {
                if (ec) return on_done(make_error_code(errc::backend_unavailable), unreachable(r.body));
                if (r.status < 200 || r.status >= 300) {
                  r.body = st->partial;
                  return on_done(make_error_code(errc::spawn_failed), "the Docker engine at " + host_ + " refused " +
                                                                          what + " (HTTP " + std::to_string(r.status) +
                                                                          "): " + engine_message(r));
                }
                if (!st->failure.empty()) return on_done(make_error_code(errc::spawn_failed), st->failure);
                on_done({}, {});
              },
              feed);
}

void docker_engine::build(std::string context_tar, const std::string& repo_tag, const std::string& dockerfile,
                          unique_function<void(std::string_view)> on_output, done<std::string> on_done,
                          const std::vector<std::pair<std::string, std::string>>& build_args) {
  boost::json::object args;
  for (auto& [k, v] : build_args) args[k] = v;
  auto req = request("POST", std::string(api) + "/build?t=" + percent_encode(repo_tag) +
                                 "&dockerfile=" + percent_encode(dockerfile) + "&rm=1&forcerm=1" +
                                 (args.empty() ? "" : "&buildargs=" + percent_encode(boost::json::serialize(args))));
  req.body = std::move(context_tar);
  req.headers.emplace_back("Content-Type", "application/x-tar");
  auto id = std::make_shared<std::string>();
  auto out = std::make_shared<unique_function<void(std::string_view)>>(std::move(on_output));
  json_stream(
      std::move(req),
      [id, out](const boost::json::object& o) {
        if (auto* s = o.if_contains("stream"); s && s->is_string()) (*out)(s->as_string());
        if (auto* aux = o.if_contains("aux"); aux && aux->is_object())
          if (auto* v = aux->as_object().if_contains("ID"); v && v->is_string()) *id = v->as_string();
      },
      [id, on_done = std::move(on_done)](std::error_code ec, std::string why) mutable {
        if (ec) return on_done(ec, {}, "the image build failed: " + why);
        on_done({}, *id, {});
      });
}

void docker_engine::tag(const std::string& image, const std::string& repo, const std::string& tag, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  call(request("POST", std::string(api) + "/images/" + percent_encode(image) + "/tag?repo=" + percent_encode(repo) +
                           "&tag=" + percent_encode(tag)),
       [d](http_response) { (*d)({}, true, {}); }, forward_error(d));
}

void docker_engine::push(const std::string& repo, const std::string& tag, const std::string& registry_auth,
                         unique_function<void(std::string_view)> on_output, done<std::string> on_done) {
  if (plain_over_network_ && !registry_auth.empty() && registry_auth != "e30")
    return on_done(make_error_code(errc::config_error), {}, plain_refusal("the registry's credentials"));
  auto req = request("POST", std::string(api) + "/images/" + percent_encode(repo) + "/push?tag=" + percent_encode(tag));
  req.headers.emplace_back("X-Registry-Auth", registry_auth.empty() ? "e30" : registry_auth);
  auto digest = std::make_shared<std::string>();
  auto out = std::make_shared<unique_function<void(std::string_view)>>(std::move(on_output));
  json_stream(
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
      [this, digest, repo, on_done = std::move(on_done)](std::error_code ec, std::string why) mutable {
        if (ec) return on_done(ec, {}, "pushing " + repo + " failed: " + why);
        if (digest->empty())
          return on_done(make_error_code(errc::spawn_failed), {},
                         "pushing " + repo + " through the Docker engine at " + host_ + " reported no digest");
        on_done({}, *digest, {});
      });
}

void docker_engine::inspect_image(const std::string& name, done<std::string> on_done) {
  auto d = std::make_shared<done<std::string>>(std::move(on_done));
  call(request("GET", std::string(api) + "/images/" + percent_encode(name) + "/json"),
       [d](http_response r) { (*d)({}, std::move(r.body), {}); }, forward_error(d));
}

void docker_engine::create_volume(const std::string& name, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  auto req = request("POST", std::string(api) + "/volumes/create");
  req.body = boost::json::serialize(boost::json::object{{"Name", name}});
  req.headers.emplace_back("Content-Type", "application/json");
  call(std::move(req), [d](http_response) { (*d)({}, true, {}); }, forward_error(d));
}

void docker_engine::has_volume(const std::string& name, done<bool> on_done) {
  exists("/volumes/" + percent_encode(name), "a volume", std::move(on_done));
}

void docker_engine::put_archive(const std::string& id, const std::string& path, std::string tar, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  auto req = request("PUT", std::string(api) + "/containers/" + id + "/archive?path=" + percent_encode(path));
  req.body = std::move(tar);
  req.headers.emplace_back("Content-Type", "application/x-tar");
  call(std::move(req), [d](http_response) { (*d)({}, true, {}); }, forward_error(d));
}

void docker_engine::get_archive(const std::string& id, const std::string& path, done<std::string> on_done) {
  auto d = std::make_shared<done<std::string>>(std::move(on_done));
  call(request("GET", std::string(api) + "/containers/" + id + "/archive?path=" + percent_encode(path)),
       [d](http_response r) { (*d)({}, std::move(r.body), {}); }, forward_error(d));
}

}  // namespace fiber::detail
