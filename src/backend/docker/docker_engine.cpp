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

http_request docker_engine::request(std::string method, const std::string& path) const {
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
       [this, shared](const http_response& r) {
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

















void docker_engine::exists(const std::string& path, const std::string& what, done<bool> on_done) {
  auto d = std::make_shared<done<bool>>(std::move(on_done));
  http_.start(request("GET", std::string(api) + path), [this, d, what](std::error_code ec, const http_response& r) {
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
       [shared](const http_response& r) {
         auto json = r.json();
         auto& info = json.as_object();
         host_room room;
         if (auto* n = info.if_contains("NCPU"); n && n->is_int64()) room.cpus = static_cast<int>(n->as_int64());
         if (auto* m = info.if_contains("MemTotal"); m && m->is_int64()) room.memory_bytes = m->as_int64();
         (*shared)({}, room, {});
       },
       [shared](std::error_code ec, std::string why) { (*shared)(ec, {}, std::move(why)); });
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
       [d, network](const http_response& r) {
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

}  // namespace fiber::detail
