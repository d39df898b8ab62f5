// The Docker Engine API's images: build, import, tag, push, describe, and ask whether the engine
// has one. Calls go through the engine's connection (docker_engine); each completes on the
// io_context.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/docker/docker_done.hpp"

namespace fiber::detail {
class docker_engine;

class docker_images {
 public:
  template <class T>
  using done = docker_done<T>;
  explicit docker_images(docker_engine& engine) : engine_(engine) {}

  /// Whether the engine has image `name`.
  void has(const std::string& name, done<bool> on_done);
  /// The image's description (GET /images/{name}/json), as JSON text.
  void inspect(const std::string& name, done<std::string> on_done);
  /// Imports a root filesystem (a tar archive) as image `repo:tag` (what `docker import` does).
  void import_root(std::string tar, const std::string& repo_tag, done<bool> on_done);
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
  /// under (sha256:...). Credentials are not sent to an engine reached unencrypted over a network.
  void push(const std::string& repo, const std::string& tag, const std::string& registry_auth,
            unique_function<void(std::string_view)> on_output, done<std::string> on_done);

 private:
  docker_engine& engine_;
};

}  // namespace fiber::detail
