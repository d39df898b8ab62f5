#include "backend/docker/docker_containers.hpp"

#include <boost/json.hpp>

#include "backend/docker/docker_engine.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

bool benign_remove_error(const std::string& why) { return why.find("No such container") != std::string::npos; }

std::string container_create_body(const container_spec& spec) {
  boost::json::object body;
  body["Image"] = spec.image;
  body["Cmd"] = boost::json::value_from(spec.cmd);
  body["Env"] = boost::json::value_from(spec.env);
  boost::json::object labels;
  for (auto& [k, v] : spec.labels) labels[k] = v;
  body["Labels"] = std::move(labels);
  boost::json::object host;
  host["Binds"] = boost::json::value_from(spec.binds);
  if (!spec.network_mode.empty()) host["NetworkMode"] = spec.network_mode;
  if (spec.cpus > 0) host["NanoCpus"] = static_cast<std::int64_t>(spec.cpus * 1e9);
  if (spec.memory_bytes > 0) {
    host["Memory"] = spec.memory_bytes;
    host["MemorySwap"] = spec.memory_bytes;  // no swap past the limit: it limits what the worker holds
  }
  if (spec.gpus > 0) {
    boost::json::object gpu{{"Driver", "nvidia"}, {"Count", spec.gpus}};
    gpu["Capabilities"] = boost::json::array{boost::json::array{"gpu"}};
    host["DeviceRequests"] = boost::json::array{gpu};
  }
  if (spec.init) host["Init"] = true;
  if (spec.restarts > 0) host["RestartPolicy"] = boost::json::object{{"Name", "on-failure"}, {"MaximumRetryCount", spec.restarts}};
  if (spec.stop_seconds >= 0) body["StopTimeout"] = spec.stop_seconds;
  if (!spec.user.empty()) body["User"] = spec.user;
  if (!spec.working_dir.empty()) body["WorkingDir"] = spec.working_dir;
  body["HostConfig"] = std::move(host);
  return boost::json::serialize(body);
}

namespace {
/// Splits the engine's multiplexed log stream ([stream u8][0 0 0][size u32 BE][bytes]) as it
/// arrives; a frame may span chunks.
struct log_demux {
  std::string pending;
  bool garbage = false;  // not a log stream (an error body): kept whole in `pending`
  unique_function<void(int, std::string_view)> out;

  void feed(std::string_view chunk) {
    pending.append(chunk);
    if (garbage) return;
    std::size_t pos = 0;
    while (pending.size() - pos >= 8) {
      auto stream = static_cast<unsigned char>(pending[pos]);
      if (stream > 2) {
        garbage = true;
        break;
      }
      auto byte = [&](std::size_t i) { return std::uint32_t(std::uint8_t(pending[pos + i])); };
      std::uint32_t n = (byte(4) << 24) | (byte(5) << 16) | (byte(6) << 8) | byte(7);
      if (pending.size() - pos - 8 < n) break;
      out(stream == 2 ? 2 : 1, std::string_view(pending).substr(pos + 8, n));
      pos += 8 + n;
    }
    pending.erase(0, pos);
  }
};
}  // namespace

void docker_containers::create(const container_spec& spec, done<std::string> on_done) {
  auto req = engine_.request("POST", std::string(docker_engine::api) + "/containers/create" +
                                 (spec.name.empty() ? "" : "?name=" + percent_encode(spec.name)));
  req.body = container_create_body(spec);
  auto shared = std::make_shared<done<std::string>>(std::move(on_done));
  auto image = spec.image;
  engine_.call(std::move(req),
       [shared](const http_response& r) { (*shared)({}, std::string(r.json().at("Id").as_string()), {}); },
       [this, shared, image](std::error_code ec, std::string why) {
         if (why.find("No such image") != std::string::npos)
           why = "image '" + image + "' is not on the Docker engine at " + engine_.host() +
                 ": build or pull it there, or set the config key 'image' (FIBER_IMAGE) to one that is";
         (*shared)(ec, {}, std::move(why));
       });
}

void docker_containers::start(const std::string& id, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  engine_.call(engine_.request("POST", std::string(docker_engine::api) + "/containers/" + id + "/start"), [d](const http_response&) { (*d)({}, true, {}); },
       docker_engine::forward_error(d));
}

void docker_containers::wait(const std::string& id, done<int> on_done) {
  auto d = std::make_shared<done<int>>(std::move(on_done));
  auto req = engine_.request("POST", std::string(docker_engine::api) + "/containers/" + id + "/wait");
  req.timeout = std::chrono::milliseconds(0);  // as long as the container runs
  engine_.call(std::move(req), [d](const http_response& r) { (*d)({}, static_cast<int>(r.json().at("StatusCode").to_number<std::int64_t>()), {}); },
       docker_engine::forward_error(d));
}

void docker_containers::kill(const std::string& id, int signal, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  engine_.call(engine_.request("POST", std::string(docker_engine::api) + "/containers/" + id + "/kill?signal=" + std::to_string(signal)),
       [d](const http_response&) { (*d)({}, true, {}); }, docker_engine::forward_error(d));
}

void docker_containers::stop(const std::string& id, int grace_seconds, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  auto req = engine_.request("POST", std::string(docker_engine::api) + "/containers/" + id + "/stop?t=" + std::to_string(grace_seconds));
  req.timeout = std::chrono::seconds(grace_seconds + 30);
  engine_.call(std::move(req), [d](const http_response&) { (*d)({}, true, {}); },
       [d](std::error_code ec, std::string why) {
         if (why.find("HTTP 304") != std::string::npos) return (*d)({}, true, {});  // stopped already
         (*d)(ec, false, std::move(why));
       });
}

void docker_containers::remove(const std::string& id, bool force, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  engine_.call(engine_.request("DELETE", std::string(docker_engine::api) + "/containers/" + id + (force ? "?force=1" : "")),
       [d](const http_response&) { (*d)({}, true, {}); },
       [this, d, id](std::error_code ec, std::string why) {
         if (why.find("already in progress") == std::string::npos) return (*d)(ec, false, std::move(why));
         // Another removal is under way: done once the engine has finished it (404: gone already).
         engine_.http_.start(engine_.request("POST", std::string(docker_engine::api) + "/containers/" + id + "/wait?condition=removed"),
                     [this, d](std::error_code failed, const http_response& r) {
                       if (failed) return (*d)(make_error_code(errc::backend_unavailable), false, engine_.unreachable(r.body));
                       (*d)({}, true, {});
                     });
       });
}

void docker_containers::logs(const std::string& id, done<std::string> on_done) {
  auto d = std::make_shared<done<std::string>>(std::move(on_done));
  engine_.call(engine_.request("GET", std::string(docker_engine::api) + "/containers/" + id + "/logs?stdout=1&stderr=1"),
       [d](const http_response& r) {
         // Without a TTY the engine multiplexes: [stream u8][0 0 0][size u32 big-endian][bytes].
         std::string out;
         const auto& b = r.body;
         std::size_t pos = 0;
         while (pos + 8 <= b.size()) {
           std::uint32_t n = (std::uint32_t(std::uint8_t(b[pos + 4])) << 24) | (std::uint32_t(std::uint8_t(b[pos + 5])) << 16) |
                             (std::uint32_t(std::uint8_t(b[pos + 6])) << 8) | std::uint32_t(std::uint8_t(b[pos + 7]));
           if (pos + 8 + n > b.size()) throw error(errc::malformed_message, "truncated log frame");
           out.append(b, pos + 8, n);
           pos += 8 + n;
         }
         (*d)({}, std::move(out), {});
       },
       docker_engine::forward_error(d));
}

void docker_containers::list(const std::string& key, const std::string& value, done<std::vector<std::string>> on_done) {
  auto d = std::make_shared<done<std::vector<std::string>>>(std::move(on_done));
  boost::json::object filters{{"label", boost::json::array{boost::json::string(key + "=" + value)}}};
  engine_.call(engine_.request("GET", std::string(docker_engine::api) + "/containers/json?all=1&filters=" + percent_encode(boost::json::serialize(filters))),
       [d](const http_response& r) {
         std::vector<std::string> ids;
         auto json = r.json();
         for (auto& c : json.as_array()) ids.emplace_back(c.at("Id").as_string());
         (*d)({}, std::move(ids), {});
       },
       docker_engine::forward_error(d));
}

void docker_containers::follow_logs(const std::string& id, unique_function<void(int, std::string_view)> on_output,
                                done<bool> on_done, const std::string& since) {
  auto demux = std::make_shared<log_demux>();
  demux->out = std::move(on_output);
  auto req = engine_.request("GET", std::string(docker_engine::api) + "/containers/" + id + "/logs?follow=1&stdout=1&stderr=1" +
                                        (since.empty() ? std::string() : "&since=" + since));
  req.timeout = std::chrono::milliseconds(0);  // as long as the container runs
  auto what = req.method + " " + req.url.substr(engine_.base_url_.size());
  engine_.http_.start(
      std::move(req),
      [this, demux, what, on_done = std::move(on_done)](std::error_code ec, http_response r) mutable {
        if (ec) return on_done(make_error_code(errc::backend_unavailable), false, engine_.unreachable(r.body));
        if (r.status < 200 || r.status >= 300) {
          r.body = demux->pending;
          return on_done(make_error_code(errc::spawn_failed), false,
                         "the Docker engine at " + engine_.host() + " refused " + what + " (HTTP " + std::to_string(r.status) +
                             "): " + docker_engine::engine_message(r));
        }
        on_done({}, true, {});
      },
      [demux](std::string_view chunk) { demux->feed(chunk); });
}

void docker_containers::pid(const std::string& id, done<int> on_done) {
  inspect(id, [on_done = std::move(on_done)](std::error_code ec, const std::string& text, std::string why) mutable {
    if (ec) return on_done(ec, 0, std::move(why));
    try {
      auto json = boost::json::parse(text);
      on_done({}, static_cast<int>(json.at("State").at("Pid").to_number<std::int64_t>()), {});
    } catch (const std::exception& e) {
      on_done(make_error_code(errc::malformed_message), 0, std::string("unexpected container description: ") + e.what());
    }
  });
}

void docker_containers::inspect(const std::string& id, done<std::string> on_done) {
  auto d = std::make_shared<done<std::string>>(std::move(on_done));
  engine_.call(engine_.request("GET", std::string(docker_engine::api) + "/containers/" + id + "/json"), [d](http_response r) { (*d)({}, std::move(r.body), {}); },
       docker_engine::forward_error(d));
}

void docker_containers::list_labeled(const std::string& key, done<std::vector<container_summary>> on_done) {
  auto d = std::make_shared<done<std::vector<container_summary>>>(std::move(on_done));
  boost::json::object filters{{"label", boost::json::array{boost::json::string(key)}}};
  engine_.call(engine_.request("GET", std::string(docker_engine::api) + "/containers/json?all=1&filters=" + percent_encode(boost::json::serialize(filters))),
       [d](const http_response& r) {
         std::vector<container_summary> out;
         auto json = r.json();
         for (auto& c : json.as_array()) {
           container_summary s;
           s.id = std::string(c.at("Id").as_string());
           if (auto* st = c.as_object().if_contains("State"); st && st->is_string()) s.state = std::string(st->as_string());
           if (auto* st = c.as_object().if_contains("Status"); st && st->is_string()) s.status = std::string(st->as_string());
           if (auto* im = c.as_object().if_contains("Image"); im && im->is_string()) s.image = std::string(im->as_string());
           if (auto* t = c.as_object().if_contains("Created"); t && t->is_int64()) s.created = t->as_int64();
           if (auto* labels = c.as_object().if_contains("Labels"); labels && labels->is_object())
             for (auto& [k, v] : labels->as_object())
               if (v.is_string()) s.labels[std::string(k)] = std::string(v.as_string());
           out.push_back(std::move(s));
         }
         (*d)({}, std::move(out), {});
       },
       docker_engine::forward_error(d));
}

void docker_containers::put_archive(const std::string& id, const std::string& path, std::string tar, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  auto req = engine_.request("PUT", std::string(docker_engine::api) + "/containers/" + id + "/archive?path=" + percent_encode(path));
  req.body = std::move(tar);
  req.headers.emplace_back("Content-Type", "application/x-tar");
  engine_.call(std::move(req), [d](const http_response&) { (*d)({}, true, {}); }, docker_engine::forward_error(d));
}

void docker_containers::get_archive(const std::string& id, const std::string& path, done<std::string> on_done) {
  auto d = std::make_shared<done<std::string>>(std::move(on_done));
  engine_.call(engine_.request("GET", std::string(docker_engine::api) + "/containers/" + id + "/archive?path=" + percent_encode(path)),
       [d](http_response r) { (*d)({}, std::move(r.body), {}); }, docker_engine::forward_error(d));
}

}  // namespace fiber::detail
