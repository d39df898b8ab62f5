// The Docker Engine API (v1.41) over the shared HTTP client: the connection (DOCKER_HOST, its TLS
// files, the version check), what the engine's host has, and its resources as parts, as the
// engine's own SDKs group them: containers(), images(), volumes(). Every operation completes on
// the io_context with (std::error_code, result, std::string why); `why` says what went wrong and
// what to do (engine unreachable, image missing, API errors).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fiber/detail/unique_function.hpp"
#include "backend/docker/docker_containers.hpp"
#include "backend/docker/docker_done.hpp"
#include "backend/docker/docker_images.hpp"
#include "backend/docker/docker_volumes.hpp"
#include "transport/http_client.hpp"

namespace fiber::detail {

class docker_engine {
 public:
  /// `host`: DOCKER_HOST's form, "unix:///var/run/docker.sock" or "tcp://host:port"; empty: the
  /// DOCKER_HOST environment variable, else the default socket.
  docker_engine(asio::io_context& io, std::string host = {});

  template <class T>
  using done = docker_done<T>;

  docker_engine(const docker_engine&) = delete;  // its parts point back at it
  docker_engine& operator=(const docker_engine&) = delete;

  /// The engine answers and speaks API v1.41 or newer.
  void check(done<std::string> on_done);  // result: the engine's version
  /// What the engine's host has (GET /info): its CPUs and memory.
  struct host_room {
    int cpus = 0;
    std::int64_t memory_bytes = 0;
  };
  void room(done<host_room> on_done);
  /// The gateway address of network `name` (how its containers reach the host): the one the
  /// engine reports, else the first address of its subnet.
  void gateway(const std::string& network, done<std::string> on_done);

  docker_containers& containers() noexcept { return containers_; }
  docker_images& images() noexcept { return images_; }
  docker_volumes& volumes() noexcept { return volumes_; }

  const std::string& host() const noexcept { return host_; }
  /// Whether what is sent to the engine crosses a network unencrypted: tcp:// to another host
  /// without DOCKER_TLS_VERIFY. Secrets (registry credentials, a container's credentials) are
  /// not sent then.
  bool plain_over_network() const noexcept { return plain_over_network_; }
  /// The request for `path` as it is sent: its URL (https:// with DOCKER_TLS_VERIFY), the unix
  /// socket, the TLS files of DOCKER_CERT_PATH.
  http_request request(std::string method, const std::string& path) const;
  /// Why a secret is not sent to this engine (plain_over_network), naming `what` and the fix.
  std::string plain_refusal(const std::string& what) const;

 private:
  // The resources call through the connection.
  friend class docker_containers;
  friend class docker_images;
  friend class docker_volumes;
  /// Runs `req`; a 2xx answer goes to `ok`, anything else to `on_error` with a message.
  void call(http_request req, unique_function<void(http_response)> ok,
            unique_function<void(std::error_code, std::string)> on_error);
  /// The Engine API version every path is asked under.
  static constexpr const char* api = "/v1.41";
  std::string unreachable(const std::string& detail) const;
  /// The engine's message from an error body ({"message": "..."}), or the body itself.
  static std::string engine_message(const http_response& r);
  /// A call's error handler that completes `d` with the error and an empty result.
  template <class T>
  static auto forward_error(std::shared_ptr<done<T>> d) {
    return [d](std::error_code ec, std::string why) { (*d)(ec, T{}, std::move(why)); };
  }
  /// GET `path` (under the API version): true for 2xx, false for 404, an error otherwise.
  void exists(const std::string& path, const std::string& what, done<bool> on_done);
  /// Runs `req`, whose answer is a stream of JSON objects (build and push progress): each goes to
  /// `on_object` as it arrives; one with "error" fails the whole (the engine answers 200 first).
  void json_stream(http_request req, unique_function<void(const boost::json::object&)> on_object,
                   unique_function<void(std::error_code, std::string)> on_done);

  std::string host_, socket_path_, base_url_;
  std::string ca_file_, cert_file_, key_file_;  // DOCKER_TLS_VERIFY: DOCKER_CERT_PATH's
  bool plain_over_network_ = false;
  http_client http_;
  docker_containers containers_{*this};
  docker_images images_{*this};
  docker_volumes volumes_{*this};
};

/// "172.17.0.0/16" → "172.17.0.1" (the address the engine's IPAM gives a bridge's gateway);
/// empty for anything but an IPv4 subnet with room for a host.
std::string first_host_of(const std::string& subnet);

}  // namespace fiber::detail
