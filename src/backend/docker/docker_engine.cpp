#include "backend/docker/docker_engine.hpp"

#include <arpa/inet.h>

#include <boost/json.hpp>
#include <cstdlib>

#include "fiber/error.hpp"

namespace fiber::detail {
namespace {

/// "1.41" < "1.9"? Compares dotted numbers.
bool version_less(const std::string& a, const std::string& b) {
  auto parse = [](const std::string& s) {
    std::vector<int> parts;
    std::size_t pos = 0;
    while (pos <= s.size()) {
      auto dot = s.find('.', pos);
      parts.push_back(std::atoi(s.substr(pos, dot - pos).c_str()));
      if (dot == std::string::npos) break;
      pos = dot + 1;
    }
    return parts;
  };
  return parse(a) < parse(b);
}
}  // namespace

std::string docker_engine::engine_message(const http_response& r) {
  boost::system::error_code ec;
  auto v = boost::json::parse(r.body, ec);
  if (!ec && v.is_object())
    if (auto* m = v.as_object().if_contains("message"); m && m->is_string()) return std::string(m->as_string());
  return r.body.empty() ? "(no message)" : r.body;
}

bool benign_remove_error(const std::string& why) { return why.find("No such container") != std::string::npos; }

docker_engine::docker_engine(asio::io_context& io, std::string host) : http_(io) {
  if (host.empty()) {
    const char* env = std::getenv("DOCKER_HOST");
    host = env && *env ? env : "unix:///var/run/docker.sock";
  }
  host_ = host;
  if (host.starts_with("unix://")) {
    socket_path_ = host.substr(7);
    base_url_ = "http://docker";
  } else if (host.starts_with("tcp://")) {
    auto where = host.substr(6);
    const char* verify = std::getenv("DOCKER_TLS_VERIFY");
    if (verify && *verify) {
      // As Docker's own client: the engine's CA, and this user's client certificate.
      std::string dir;
      if (const char* p = std::getenv("DOCKER_CERT_PATH"); p && *p) dir = p;
      else if (const char* home = std::getenv("HOME"); home && *home) dir = std::string(home) + "/.docker";
      else
        throw error(errc::config_error, "DOCKER_TLS_VERIFY is set, but neither DOCKER_CERT_PATH nor HOME says where "
                                        "ca.pem, cert.pem and key.pem are: set DOCKER_CERT_PATH");
      ca_file_ = dir + "/ca.pem";
      cert_file_ = dir + "/cert.pem";
      key_file_ = dir + "/key.pem";
      base_url_ = "https://" + where;
    } else {
      base_url_ = "http://" + where;
      auto name = where.substr(0, where.rfind(':'));
      bool loopback = name.starts_with("127.") || name == "localhost" || name == "[::1]";
      plain_over_network_ = !loopback;
    }
  } else {
    throw error(errc::config_error, "DOCKER_HOST '" + host + "' is neither unix:///path nor tcp://host:port");
  }
}

http_request docker_engine::request(std::string method, std::string path) const {
  http_request r;
  r.method = std::move(method);
  r.url = base_url_ + path;
  r.unix_socket = socket_path_;
  r.ca_file = ca_file_;
  r.cert_file = cert_file_;
  r.key_file = key_file_;
  return r;
}

std::string docker_engine::plain_refusal(const std::string& what) const {
  return "not sending " + what + " to the Docker engine at " + host_ +
         ": it is reached over plain TCP, where anyone on the network path reads it. Give the engine TLS and set "
         "DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH (its ca.pem, cert.pem, key.pem), or use an engine on this host";
}

std::string docker_engine::unreachable(const std::string& detail) const {
  return "cannot reach the Docker engine at " + host_ + " (" + detail +
         "): start dockerd, or point DOCKER_HOST at a running engine";
}

void docker_engine::call(http_request req, unique_function<void(http_response)> ok,
                         unique_function<void(std::error_code, std::string)> on_error) {
  auto what = req.method + " " + req.url.substr(base_url_.size());
  http_.start(std::move(req), [this, what, ok = std::move(ok), on_error = std::move(on_error)](
                                  std::error_code ec, http_response r) mutable {
    if (ec) return on_error(make_error_code(errc::backend_unavailable), unreachable(r.body));
    if (r.status < 200 || r.status >= 300)
      return on_error(make_error_code(errc::spawn_failed), "the Docker engine at " + host_ + " refused " + what +
                                                               " (HTTP " + std::to_string(r.status) +
                                                               "): " + engine_message(r));
    try {
      ok(std::move(r));
    } catch (const std::exception& e) {
      on_error(make_error_code(errc::malformed_message), "unexpected answer to " + what + ": " + e.what());
    }
  });
}

void docker_engine::check(done<std::string> on_done) {
  auto shared = std::make_shared<done<std::string>>(std::move(on_done));
  call(request("GET", "/version"),
       [this, shared](http_response r) {
         auto json = r.json();
         auto& v = json.as_object();
         std::string api_version = v.contains("ApiVersion") ? std::string(v.at("ApiVersion").as_string()) : "?";
         std::string version = v.contains("Version") ? std::string(v.at("Version").as_string()) : "?";
         if (api_version == "?" || version_less(api_version, "1.41"))
           return (*shared)(make_error_code(errc::backend_unavailable), {},
                            "the Docker engine at " + host_ + " (Docker " + version + ") speaks API " + api_version +
                                "; fiber needs 1.41 or newer: upgrade Docker");
         (*shared)({}, version, {});
       },
       [shared](std::error_code ec, std::string why) { (*shared)(ec, {}, std::move(why)); });
}

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
  if (spec.memory_bytes > 0) host["Memory"] = spec.memory_bytes;
  if (spec.gpus > 0) {
    boost::json::object gpu{{"Driver", "nvidia"}, {"Count", spec.gpus}};
    gpu["Capabilities"] = boost::json::array{boost::json::array{"gpu"}};
    host["DeviceRequests"] = boost::json::array{gpu};
  }
  if (spec.init) host["Init"] = true;
  if (!spec.user.empty()) body["User"] = spec.user;
  if (!spec.working_dir.empty()) body["WorkingDir"] = spec.working_dir;
  body["HostConfig"] = std::move(host);
  return boost::json::serialize(body);
}

void docker_engine::create(const container_spec& spec, done<std::string> on_done) {
  auto req = request("POST", std::string(api) + "/containers/create" +
                                 (spec.name.empty() ? "" : "?name=" + percent_encode(spec.name)));
  req.body = container_create_body(spec);
  auto shared = std::make_shared<done<std::string>>(std::move(on_done));
  auto image = spec.image;
  call(std::move(req),
       [shared](http_response r) { (*shared)({}, std::string(r.json().at("Id").as_string()), {}); },
       [this, shared, image](std::error_code ec, std::string why) {
         if (why.find("No such image") != std::string::npos)
           why = "image '" + image + "' is not on the Docker engine at " + host_ +
                 ": build or pull it there, or set the config key 'image' (FIBER_IMAGE) to one that is";
         (*shared)(ec, {}, std::move(why));
       });
}


void docker_engine::start(const std::string& id, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  call(request("POST", std::string(api) + "/containers/" + id + "/start"), [d](http_response) { (*d)({}, true, {}); },
       forward_error(d));
}

void docker_engine::wait(const std::string& id, done<int> on_done) {
  auto d = std::make_shared<done<int>>(std::move(on_done));
  auto req = request("POST", std::string(api) + "/containers/" + id + "/wait");
  req.timeout = std::chrono::milliseconds(0);  // as long as the container runs
  call(std::move(req), [d](http_response r) { (*d)({}, static_cast<int>(r.json().at("StatusCode").to_number<std::int64_t>()), {}); },
       forward_error(d));
}

void docker_engine::kill(const std::string& id, int signal, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  call(request("POST", std::string(api) + "/containers/" + id + "/kill?signal=" + std::to_string(signal)),
       [d](http_response) { (*d)({}, true, {}); }, forward_error(d));
}

void docker_engine::stop(const std::string& id, int grace_seconds, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  auto req = request("POST", std::string(api) + "/containers/" + id + "/stop?t=" + std::to_string(grace_seconds));
  req.timeout = std::chrono::seconds(grace_seconds + 30);
  call(std::move(req), [d](http_response) { (*d)({}, true, {}); },
       [d](std::error_code ec, std::string why) {
         if (why.find("HTTP 304") != std::string::npos) return (*d)({}, true, {});  // stopped already
         (*d)(ec, false, std::move(why));
       });
}

void docker_engine::remove(const std::string& id, bool force, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  call(request("DELETE", std::string(api) + "/containers/" + id + (force ? "?force=1" : "")),
       [d](http_response) { (*d)({}, true, {}); },
       [this, d, id](std::error_code ec, std::string why) {
         if (why.find("already in progress") == std::string::npos) return (*d)(ec, false, std::move(why));
         // Another removal is under way: done once the engine has finished it (404: gone already).
         http_.start(request("POST", std::string(api) + "/containers/" + id + "/wait?condition=removed"),
                     [this, d](std::error_code ec, http_response r) {
                       if (ec) return (*d)(make_error_code(errc::backend_unavailable), false, unreachable(r.body));
                       (*d)({}, true, {});
                     });
       });
}

void docker_engine::logs(const std::string& id, done<std::string> on_done) {
  auto d = std::make_shared<done<std::string>>(std::move(on_done));
  call(request("GET", std::string(api) + "/containers/" + id + "/logs?stdout=1&stderr=1"),
       [d](http_response r) {
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
       forward_error(d));
}

void docker_engine::import_image(std::string tar, const std::string& repo_tag, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  auto colon = repo_tag.rfind(':');
  auto repo = repo_tag.substr(0, colon), tag = colon == std::string::npos ? "latest" : repo_tag.substr(colon + 1);
  auto req = request("POST", std::string(api) + "/images/create?fromSrc=-&repo=" + percent_encode(repo) +
                                 "&tag=" + percent_encode(tag));
  req.body = std::move(tar);
  req.headers.emplace_back("Content-Type", "application/x-tar");
  // The engine streams progress as JSON lines; an error shows up as {"error": ...} in them.
  call(std::move(req),
       [d](http_response r) {
         if (auto at = r.body.find("\"error\""); at != std::string::npos)
           return (*d)(make_error_code(errc::spawn_failed), false, "image import failed: " + r.body);
         (*d)({}, true, {});
       },
       forward_error(d));
}

void docker_engine::list(const std::string& key, const std::string& value, done<std::vector<std::string>> on_done) {
  auto d = std::make_shared<done<std::vector<std::string>>>(std::move(on_done));
  boost::json::object filters{{"label", boost::json::array{boost::json::string(key + "=" + value)}}};
  call(request("GET", std::string(api) + "/containers/json?all=1&filters=" + percent_encode(boost::json::serialize(filters))),
       [d](http_response r) {
         std::vector<std::string> ids;
         auto json = r.json();
         for (auto& c : json.as_array()) ids.emplace_back(c.at("Id").as_string());
         (*d)({}, std::move(ids), {});
       },
       forward_error(d));
}

}  // namespace fiber::detail

namespace fiber::detail {
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

void docker_engine::follow_logs(const std::string& id, unique_function<void(int, std::string_view)> on_output,
                                done<bool> on_done) {
  auto demux = std::make_shared<log_demux>();
  demux->out = std::move(on_output);
  auto req = request("GET", std::string(api) + "/containers/" + id + "/logs?follow=1&stdout=1&stderr=1");
  req.timeout = std::chrono::milliseconds(0);  // as long as the container runs
  auto what = req.method + " " + req.url.substr(base_url_.size());
  http_.start(
      std::move(req),
      [this, demux, what, on_done = std::move(on_done)](std::error_code ec, http_response r) mutable {
        if (ec) return on_done(make_error_code(errc::backend_unavailable), false, unreachable(r.body));
        if (r.status < 200 || r.status >= 300) {
          r.body = demux->pending;
          return on_done(make_error_code(errc::spawn_failed), false,
                         "the Docker engine at " + host_ + " refused " + what + " (HTTP " + std::to_string(r.status) +
                             "): " + engine_message(r));
        }
        on_done({}, true, {});
      },
      [demux](std::string_view chunk) { demux->feed(chunk); });
}

void docker_engine::pid(const std::string& id, done<int> on_done) {
  inspect(id, [on_done = std::move(on_done)](std::error_code ec, std::string text, std::string why) mutable {
    if (ec) return on_done(ec, 0, std::move(why));
    try {
      auto json = boost::json::parse(text);
      on_done({}, static_cast<int>(json.at("State").at("Pid").to_number<std::int64_t>()), {});
    } catch (const std::exception& e) {
      on_done(make_error_code(errc::malformed_message), 0, std::string("unexpected container description: ") + e.what());
    }
  });
}

void docker_engine::inspect(const std::string& id, done<std::string> on_done) {
  auto d = std::make_shared<done<std::string>>(std::move(on_done));
  call(request("GET", std::string(api) + "/containers/" + id + "/json"), [d](http_response r) { (*d)({}, std::move(r.body), {}); },
       forward_error(d));
}

void docker_engine::remove_volume(const std::string& name, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  call(request("DELETE", std::string(api) + "/volumes/" + percent_encode(name)), [d](http_response) { (*d)({}, true, {}); },
       forward_error(d));
}

void docker_engine::exists(const std::string& path, const std::string& what, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  http_.start(request("GET", std::string(api) + path), [this, d, what](std::error_code ec, http_response r) {
    if (ec) return (*d)(make_error_code(errc::backend_unavailable), false, unreachable(r.body));
    if (r.status == 404) return (*d)({}, false, {});
    if (r.status < 200 || r.status >= 300)
      return (*d)(make_error_code(errc::spawn_failed), false,
                  "the Docker engine at " + host_ + " refused to inspect " + what + " (HTTP " + std::to_string(r.status) +
                      "): " + engine_message(r));
    (*d)({}, true, {});
  });
}

void docker_engine::room(done<host_room> on_done) {
  auto shared = std::make_shared<done<host_room>>(std::move(on_done));
  call(request("GET", "/info"),
       [shared](http_response r) {
         auto json = r.json();
         auto& info = json.as_object();
         host_room room;
         if (auto* n = info.if_contains("NCPU"); n && n->is_int64()) room.cpus = static_cast<int>(n->as_int64());
         if (auto* m = info.if_contains("MemTotal"); m && m->is_int64()) room.memory_bytes = m->as_int64();
         (*shared)({}, room, {});
       },
       [shared](std::error_code ec, std::string why) { (*shared)(ec, {}, std::move(why)); });
}

void docker_engine::has_image(const std::string& name, done<bool> on_done) {
  exists("/images/" + percent_encode(name) + "/json", "an image", std::move(on_done));
}

std::string first_host_of(const std::string& subnet) {
  auto slash = subnet.find('/');
  if (slash == std::string::npos) return {};
  in_addr net{};
  if (::inet_pton(AF_INET, subnet.substr(0, slash).c_str(), &net) != 1) return {};
  int bits = std::atoi(subnet.c_str() + slash + 1);
  if (bits < 1 || bits > 30) return {};
  std::uint32_t mask = ~std::uint32_t{0} << (32 - bits);
  in_addr host{htonl((ntohl(net.s_addr) & mask) + 1)};
  char text[INET_ADDRSTRLEN] = {};
  return ::inet_ntop(AF_INET, &host, text, sizeof text) ? std::string(text) : std::string();
}

void docker_engine::gateway(const std::string& network, done<std::string> on_done) {
  auto d = std::make_shared<done<std::string>>(std::move(on_done));
  call(request("GET", std::string(api) + "/networks/" + percent_encode(network)),
       [d, network](http_response r) {
         auto json = r.json();
         if (auto* ipam = json.as_object().if_contains("IPAM"))
           if (auto* configs = ipam->as_object().if_contains("Config"); configs && configs->is_array())
             for (auto& c : configs->as_array()) {
               auto field = [&](const char* key) {
                 auto* v = c.as_object().if_contains(key);
                 return v && v->is_string() ? std::string(v->as_string()) : std::string();
               };
               if (auto g = field("Gateway"); !g.empty() && g.find(':') == std::string::npos)  // IPv4
                 return (*d)({}, g, {});
               // A default bridge the engine made on its first start reports only its subnet; its
               // gateway is then the subnet's first address, as the engine's IPAM assigns it.
               if (auto g = first_host_of(field("Subnet")); !g.empty()) return (*d)({}, g, {});
             }
         (*d)(make_error_code(errc::config_error), {},
              "Docker network '" + network +
                  "' has no IPv4 gateway for containers to reach the master: set the config key 'master_address'");
       },
       forward_error(d));
}

void docker_engine::list_labeled(const std::string& key, done<std::vector<container_summary>> on_done) {
  auto d = std::make_shared<done<std::vector<container_summary>>>(std::move(on_done));
  boost::json::object filters{{"label", boost::json::array{boost::json::string(key)}}};
  call(request("GET", std::string(api) + "/containers/json?all=1&filters=" + percent_encode(boost::json::serialize(filters))),
       [d](http_response r) {
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
       forward_error(d));
}

}  // namespace fiber::detail
