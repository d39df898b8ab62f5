// The Docker Engine API (v1.41) over the shared HTTP client: what the docker backend needs.
// Every operation completes on the io_context with (std::error_code, result, std::string why);
// `why` says what went wrong and what to do (engine unreachable, image missing, API errors).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fiber/detail/unique_function.hpp"
#include "transport/http_client.hpp"

namespace fiber::detail {

struct container_spec {
  std::string image;
  std::vector<std::string> cmd;
  std::vector<std::string> env;                  // "KEY=value"
  std::map<std::string, std::string> labels;
  std::vector<std::string> binds;                // "host:container[:ro]" or "volume:container"
  std::string network_mode;                      // "host", "bridge" or empty (the engine's default)
  double cpus = 0;                               // 0: no limit
  std::int64_t memory_bytes = 0;                 // 0: no limit
  int gpus = 0;                                  // DeviceRequests for nvidia GPUs
  std::string name;                              // empty: the engine picks one
  bool init = false;                             // the engine's init (tini) as pid 1
  std::string user;                              // "uid:gid"; empty: the image's
  std::string working_dir;                       // empty: the image's
};

/// The body of POST /containers/create for `spec` (what `fiber run --dry-run` shows).
std::string container_create_body(const container_spec& spec);

/// A removal that failed only because the container is gone already.
bool benign_remove_error(const std::string& why);

struct container_summary {
  std::string id;
  std::string state;   // created, running, exited, ...
  std::string status;  // the engine's words: "Up 3 minutes", "Exited (3) 5 seconds ago"
  std::string image;
  std::int64_t created = 0;  // seconds since the epoch
  std::map<std::string, std::string> labels;
};

class docker_engine {
 public:
  /// `host`: DOCKER_HOST's form, "unix:///var/run/docker.sock" or "tcp://host:port"; empty: the
  /// DOCKER_HOST environment variable, else the default socket.
  docker_engine(asio::io_context& io, std::string host = {});

  template <class T>
  using done = unique_function<void(std::error_code, T, std::string why)>;

  /// The engine answers and speaks API v1.41 or newer.
  void check(done<std::string> on_done);  // result: the engine's version
  void create(const container_spec& spec, done<std::string> on_done);  // result: the container id
  void start(const std::string& id, done<bool> on_done);
  /// Completes when the container has stopped; result: its exit code.
  void wait(const std::string& id, done<int> on_done);
  void kill(const std::string& id, int signal, done<bool> on_done);
  /// SIGTERM, then SIGKILL after `grace_seconds`, as `docker stop` does; done once it stopped.
  void stop(const std::string& id, int grace_seconds, done<bool> on_done);
  /// Completes once the container is gone (also when another removal of it was under way).
  void remove(const std::string& id, bool force, done<bool> on_done);
  /// stdout and stderr, demultiplexed (each stream in order; between the two, as the engine
  /// recorded them).
  void logs(const std::string& id, done<std::string> on_done);
  /// Imports a root filesystem (a tar archive) as image `repo:tag` (what `docker import` does).
  void import_image(std::string tar, const std::string& repo_tag, done<bool> on_done);
  /// Output as the container writes it, until it ends: `on_output(stream, bytes)` with stream 1
  /// (stdout) or 2 (stderr); `on_done` when the stream closes.
  void follow_logs(const std::string& id, unique_function<void(int, std::string_view)> on_output, done<bool> on_done);
  /// The container's description (GET /containers/{id}/json), as JSON text.
  void inspect(const std::string& id, done<std::string> on_done);
  /// Removes a named volume.
  void remove_volume(const std::string& name, done<bool> on_done);
  /// The host pid of the container's main process (0 when it is not running).
  void pid(const std::string& id, done<int> on_done);
  /// Whether the engine has image `name`.
  void has_image(const std::string& name, done<bool> on_done);
  /// What the engine's host has (GET /info): its CPUs and memory.
  struct host_room {
    int cpus = 0;
    std::int64_t memory_bytes = 0;
  };
  void room(done<host_room> on_done);
  /// The gateway address of network `name` (how its containers reach the host): the one the
  /// engine reports, else the first address of its subnet.
  void gateway(const std::string& network, done<std::string> on_done);
  /// Containers (running or not) carrying label `key`, with their labels.
  void list_labeled(const std::string& key, done<std::vector<container_summary>> on_done);
  /// Ids of the containers (running or not) carrying label `key=value`.
  void list(const std::string& key, const std::string& value, done<std::vector<std::string>> on_done);

  /// Builds an image from `context_tar` (a tar archive holding the Dockerfile at `dockerfile`),
  /// tagged `repo_tag`; `on_output` gets the build's output as the engine reports it. Result: the
  /// image id (sha256:...).
  void build(std::string context_tar, const std::string& repo_tag, const std::string& dockerfile,
             unique_function<void(std::string_view)> on_output, done<std::string> on_done,
             const std::vector<std::pair<std::string, std::string>>& build_args = {});
  /// Gives image `image` (a name or id) the name `repo:tag` as well.
  void tag(const std::string& image, const std::string& repo, const std::string& tag, done<bool> on_done);
  /// Pushes `repo:tag` to its registry with `registry_auth` (the X-Registry-Auth header's value:
  /// base64url JSON of the credentials, "e30" for none). Result: the digest the registry holds it
  /// under (sha256:...).
  void push(const std::string& repo, const std::string& tag, const std::string& registry_auth,
            unique_function<void(std::string_view)> on_output, done<std::string> on_done);
  /// The image's description (GET /images/{name}/json), as JSON text.
  void inspect_image(const std::string& name, done<std::string> on_done);
  /// Ensures named volume `name` exists.
  void create_volume(const std::string& name, done<bool> on_done);
  /// Whether named volume `name` exists.
  void has_volume(const std::string& name, done<bool> on_done);
  /// Extracts the tar archive `tar` at `path` in container `id` (created, not necessarily started:
  /// the engine does the work, the image needs no tar). The archive's owners are kept.
  void put_archive(const std::string& id, const std::string& path, std::string tar, done<bool> on_done);
  /// `path` in container `id` as a tar archive (its top entry named as the path's last part).
  void get_archive(const std::string& id, const std::string& path, done<std::string> on_done);

  const std::string& host() const noexcept { return host_; }
  /// Whether what is sent to the engine crosses a network unencrypted: tcp:// to another host
  /// without DOCKER_TLS_VERIFY. Secrets (registry credentials, a container's credentials) are
  /// not sent then.
  bool plain_over_network() const noexcept { return plain_over_network_; }
  /// The request for `path` as it is sent: its URL (https:// with DOCKER_TLS_VERIFY), the unix
  /// socket, the TLS files of DOCKER_CERT_PATH.
  http_request request(std::string method, std::string path) const;
  /// Why a secret is not sent to this engine (plain_over_network), naming `what` and the fix.
  std::string plain_refusal(const std::string& what) const;

 private:
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
};

/// "172.17.0.0/16" → "172.17.0.1" (the address the engine's IPAM gives a bridge's gateway);
/// empty for anything but an IPv4 subnet with room for a host.
std::string first_host_of(const std::string& subnet);

}  // namespace fiber::detail
