// The Docker Engine API's named volumes: create one, ask whether it exists, remove it. Calls go
// through the engine's connection (docker_engine); each completes on the io_context.
#pragma once
#include <string>

#include "backend/docker/docker_done.hpp"

namespace fiber::detail {
class docker_engine;

class docker_volumes {
 public:
  template <class T>
  using done = docker_done<T>;
  explicit docker_volumes(docker_engine& engine) : engine_(engine) {}

  /// Ensures named volume `name` exists.
  void create(const std::string& name, done<bool> on_done);
  void has(const std::string& name, done<bool> on_done);
  void remove(const std::string& name, done<bool> on_done);

 private:
  docker_engine& engine_;
};

}  // namespace fiber::detail
