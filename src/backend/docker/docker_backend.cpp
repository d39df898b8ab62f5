// Docker backend: every child is a container of the configured image running this program with
// the worker flag. Containers carry the labels fiber.job, fiber.master and fiber.process, and are
// removed when they end, when they are killed, and when the master's context ends.
#include <asio/io_context.hpp>
#include <arpa/inet.h>
#include <asio/steady_timer.hpp>
#include <netdb.h>
#include <unistd.h>

#include <asio/post.hpp>
#include <boost/json.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <tuple>

#include "core/volume.hpp"
#include "backend/backend.hpp"
#include "backend/engine_run.hpp"
#include "backend/node_room.hpp"
#include "backend/docker/blocking_engine.hpp"
#include "backend/docker/docker_engine.hpp"
#include "backend/docker/secret_archive.hpp"
#include "backend/side_thread.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "core/log.hpp"
#include "core/worker_env.hpp"

namespace fiber::detail {
namespace {

/// A container create's answer, given on the creator's thread and read on the loop's.
struct container_created {
  std::error_code ec;
  std::string id, why;
};
using pending_create = one_answer<container_created>;

/// Creates containers on a thread of its own, several at once: the caller's loop never waits for
/// the engine, and a job killed while its container is being created can wait for the id and
/// remove it (a killed job is a removed container, always).
class creator {
 public:
  explicit creator(const std::string& host) : engine_(thread_.io(), host) {}
  ~creator() { thread_.finish(); }  // creates in flight finish while the engine still exists

  /// `answered` runs on the creator's thread once `pending` is set. `secret`, when given, is in
  /// the container (secret_archive) before the answer: a create whose secret could not be placed
  /// answers with the error and the container's id, for its removal.
  void create(container_spec spec, std::string secret, std::shared_ptr<pending_create> pending,
              unique_function<void()> answered) {
    asio::post(thread_.io(), [this, spec = std::move(spec), secret = std::move(secret), pending = std::move(pending),
                              answered = std::move(answered)]() mutable {
      engine_.containers().create(spec, [this, secret = std::move(secret), pending = std::move(pending),
                            answered = std::move(answered)](std::error_code ec, std::string id, std::string why) mutable {
        if (ec || secret.empty()) {
          pending->set({ec, std::move(id), std::move(why)});
          return answered();
        }
        // Owned by the user the container runs as (this process's, container_spec::user).
        engine_.containers().put_archive(id, "/", secret_archive(secret, ::getuid(), ::getgid()),
                            [id, pending = std::move(pending), answered = std::move(answered)](
                                std::error_code placed, bool, const std::string& refused) mutable {
                              pending->set({placed, id, placed ? "cannot place its credentials in it: " + refused : std::string()});
                              answered();
                            });
      });
    });
  }

 private:
  side_thread thread_;
  docker_engine engine_;
};

/// A container name from the job and process names ([a-zA-Z0-9][a-zA-Z0-9_.-]*).
std::string container_name(const std::string& job_id, const std::string& process) {
  std::string out = "fiber-" + job_id + "-";
  for (char c : process) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ? c : '_';
  return out;
}

/// The engine reports a child killed by signal N (through the container's init) as 128 + N;
/// fiber reports -N on every backend.
int exit_code_from_engine(int code) { return code > 128 && code <= 128 + 64 ? -(code - 128) : code; }

/// Exit code of a container the engine could not create or start.
constexpr int not_started = 255;

/// One container's life, shared by the job and the engine's callbacks.
/// Whether a container's description (docker inspect) says the kernel killed it for its memory limit.
bool oom_killed(const std::string& inspected) {
  boost::json::error_code ec;
  auto v = boost::json::parse(inspected, ec);
  if (ec || !v.is_object()) return false;
  auto* state = v.as_object().if_contains("State");
  auto* oom = state && state->is_object() ? state->as_object().if_contains("OOMKilled") : nullptr;
  return oom && oom->is_bool() && oom->as_bool();
}

struct container_run final : engine_run, std::enable_shared_from_this<container_run> {
  enum class stage { creating, starting, running, ended };

  std::shared_ptr<docker_engine> engine;
  std::shared_ptr<blocking_engine> blocking;
  asio::io_context& io;
  std::shared_ptr<pending_create> create = std::make_shared<pending_create>();
  std::string process_name, id;
  stage at = stage::creating;
  int pending_signal = 0;
  int code = 0;
  std::string detail, stderr_tail;
  bool no_gpu_driver = false;  // the engine refused for good: no container here ever gets a GPU
  bool wait_done = false, logs_done = false, removing = false;
  std::unique_ptr<asio::steady_timer> logs_grace;
  std::uint64_t memory_limit_mb = 0;  // its container's limit; 0: none
  bool oom_asked = false;

  // The pid is the container's process on the engine's host, asked of the engine once it runs.
  container_run(std::shared_ptr<docker_engine> e, std::shared_ptr<blocking_engine> b, asio::io_context& context,
                std::string name)
      : engine_run({.queued = false, .identified_later = true}),
        engine(std::move(e)),
        blocking(std::move(b)),
        io(context),
        process_name(std::move(name)) {}

  bool never_fits() const noexcept override { return no_gpu_driver; }
  void reported_pid(int) override {}  // the child's pid inside its container, not the host's
  std::string handle() const override { return id; }

  /// Container `container`, started by an earlier master, taken up as it runs: its end and its
  /// output from now on are this run's (what it printed before was passed on by that master).
  void take_up(const std::string& container) {
    id = container;
    auto now = std::chrono::system_clock::now().time_since_epoch();
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count();
    auto frac = std::to_string(ns % 1000000000);
    watch_running(std::to_string(ns / 1000000000) + "." + std::string(9 - frac.size(), '0') + frac);
  }

  void kill_and_reap() noexcept override {
    if (at == stage::ended) return;
    forget_waiters();  // the caller reports the kill itself
    end(-SIGKILL, {});
    // Reaped means gone: removed now, whether or not the loop runs again (a container being
    // created is waited for first).
    auto made = id.empty() ? create->wait().id : id;
    if (made.empty()) return;  // the engine never created it
    try {
      blocking->remove_all({made});
    } catch (const std::exception& e) {
      logf(log_level::warn, "could not remove container ", made.substr(0, 12), ": ", e.what());
    }
  }

  void begin(creator& c, container_spec spec, std::string secret) {
    memory_limit_mb = static_cast<std::uint64_t>(std::max<std::int64_t>(spec.memory_bytes, 0) >> 20);
    c.create(std::move(spec), std::move(secret), create, [weak = weak_from_this(), &io = io] {
      asio::post(io, [weak] {
        if (auto self = weak.lock()) self->created();
      });
    });
  }

  void created() {
    auto& made = create->wait();  // set already: this runs after the answer
    if (made.ec && !made.id.empty()) {  // made, but not ready to start: it goes
      id = made.id;
      if (at == stage::ended) return;  // killed meanwhile: kill_and_reap removed it
      return remove_then([self = shared_from_this(), why = made.why] {
        self->end(not_started, "the Docker engine could not prepare its container: " + why);
      });
    }
    if (made.ec) return end(not_started, "the Docker engine could not create its container: " + made.why);
    id = made.id;
    if (at == stage::ended) return;  // killed meanwhile: kill_and_reap removed it
    at = stage::starting;
    if (pending_signal == SIGKILL || pending_signal == SIGTERM) {
      int sig = pending_signal;
      return remove_then([self = shared_from_this(), sig] { self->end(-sig, {}); });
    }
    engine->containers().start(id, [self = shared_from_this()](std::error_code ec, bool, std::string why) {
      self->started(ec, std::move(why));
    });
  }

  void started(std::error_code ec, std::string why) {
    if (at == stage::ended) return;
    if (ec) {
      // The engine has no driver for the GPU the child asked for: no container here ever gets one.
      if (why.find("could not select device driver") != std::string::npos) {
        no_gpu_driver = true;
        why += "; this engine cannot give containers GPUs (it needs the NVIDIA Container Toolkit)";
      }
      return remove_then([self = shared_from_this(), refused = std::move(why)] {
        self->end(not_started, "the Docker engine could not start its container: " + refused);
      });
    }
    logf(log_level::debug, process_name, ": container ", id.substr(0, 12), " started");
    watch_running({});
    if (pending_signal) send(pending_signal);
  }

  /// It runs: its end, its output (from `since`; empty: from its start) and its pid are watched.
  void watch_running(const std::string& since) {
    at = stage::running;
    auto self = shared_from_this();
    engine->containers().wait(id, [self](std::error_code failed, int status, const std::string& reason) {
      self->waited(failed, status, reason);
    });
    engine->containers().follow_logs(
        id, [self](int stream, std::string_view bytes) { self->output(stream, bytes); },
        [self](std::error_code, bool, const std::string&) {
          self->logs_done = true;
          if (self->wait_done) self->stopped();
        },
        since);
    engine->containers().pid(id, [self](std::error_code failed, int found, const std::string&) {
      if (!failed) self->pid = found;
      self->mark_identified();
    });
  }

  /// The container's output goes where a local child's would: this process's stdout and stderr.
  void output(int stream, std::string_view bytes) {
    for (std::size_t done = 0; done < bytes.size();) {
      auto n = ::write(stream, bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    if (stream == 2) {
      stderr_tail.append(bytes);
      if (stderr_tail.size() > 2048) stderr_tail.erase(0, stderr_tail.size() - 2048);
    }
  }

  void waited(std::error_code ec, int engine_code, const std::string& why) {
    if (at == stage::ended) return;
    wait_done = true;
    logf(log_level::debug, process_name, ": container ", id.substr(0, 12), " stopped with ", engine_code);
    if (ec) {
      code = not_started;
      detail = "lost track of its container: " + why;
    } else {
      code = exit_code_from_engine(engine_code);
    }
    if (logs_done) return stopped();
    // The log stream closes right after the container stops; its last lines explain a failure.
    logs_grace = std::make_unique<asio::steady_timer>(io, std::chrono::seconds(1));
    logs_grace->async_wait([self = shared_from_this()](std::error_code) { self->stopped(); });
  }

  /// The container has stopped: it is removed, and then the job has ended. One killed with a
  /// memory limit is asked first whether the kernel killed it for going past it.
  void stopped() {
    if (at == stage::ended || removing) return;
    if (logs_grace) logs_grace->cancel();
    if (memory_limit_mb && code == -SIGKILL && !oom_asked && !id.empty()) {
      oom_asked = true;
      return engine->containers().inspect(id, [self = shared_from_this()](std::error_code ec, const std::string& text,
                                                                          const std::string&) {
        if (!ec && oom_killed(text)) {
          self->stopped_for_memory({self->memory_limit_mb, 0});
          self->detail = memory_stop_text({self->memory_limit_mb, 0}) + ": its container was OOM-killed";
        }
        self->stopped();
      });
    }
    if (detail.empty() && code != 0 && !stderr_tail.empty()) {
      auto tail = stderr_tail;
      while (!tail.empty() && tail.back() == '\n') tail.pop_back();
      detail = "its last output: " + tail;
    }
    remove_then([self = shared_from_this()] {
      logf(log_level::debug, self->process_name, ": container ", self->id.substr(0, 12), " removed");
      self->end(self->code, self->detail);
    });
  }

  void end(int exit_code, std::string why) {
    if (at == stage::ended) return;
    at = stage::ended;
    code = exit_code;
    detail = why;
    report_end(exit_code, std::move(why));
  }

  void send(int sig) {
    engine->containers().kill(id, sig, [](std::error_code, bool, const std::string&) {});  // it may have ended already
  }

  void signal(int sig) noexcept override {
    switch (at) {
      case stage::creating:
      case stage::starting:
        if (pending_signal != SIGKILL) pending_signal = sig;
        return;
      case stage::running: return send(sig);
      case stage::ended: return;
    }
  }

  void remove_then(unique_function<void()> next) {
    removing = true;
    engine->containers().remove(id, true, [id = id, next = std::move(next)](std::error_code ec, bool, const std::string& why) mutable {
      if (ec && !benign_remove_error(why))
        logf(log_level::warn, "could not remove container ", id.substr(0, 12), ": ", why);
      next();
    });
  }
};

class docker_backend final : public tcp_backend {
 public:
  docker_backend(asio::io_context& io, const fiber::config& cfg, std::string job_id)
      : io_(io), cfg_(cfg), job_id_(std::move(job_id)), master_(master_mark()) {
    if (cfg.image.empty())
      throw error(errc::config_error,
                  "backend=docker needs an image: set the config key 'image' (FIBER_IMAGE) to an image that holds "
                  "this program at the same path, or mounts it through 'volumes'");
    engine_ = std::make_shared<docker_engine>(io, std::string{});
    blocking_ = std::make_shared<blocking_engine>(engine_->host());
    auto& engine = *blocking_;
    engine.run<std::string>([](docker_engine& e, auto done) { e.check(std::move(done)); });
    if (!engine.run<bool>([&](docker_engine& e, auto done) { e.images().has(cfg.image, std::move(done)); }))
      throw error(errc::config_error, "image '" + cfg.image + "' is not on the Docker engine at " + engine_->host() +
                                          ": build or pull it there, or set the config key 'image' (FIBER_IMAGE) "
                                          "to one that is");
    auto room = engine.run<docker_engine::host_room>([](docker_engine& e, auto done) { e.room(std::move(done)); });
    // GPUs are the engine's to find at start (a device driver it may or may not have).
    if (room.cpus > 0) rooms_.push_back(node_room{"the engine's host", static_cast<double>(room.cpus), room.memory_bytes >> 20, -1});
    for (auto& v : parse_volumes(cfg.volumes))
      binds_.push_back(v.source + ":" + v.target + (v.read_only ? ":ro" : ""));
    bind_host_ = advertise_host_ = pick_master_address(engine);
    if (!cfg.master_address.empty() || in_container()) bind_host_ = "0.0.0.0";
    remove_orphans(engine);
    creator_ = std::make_unique<creator>(engine_->host());
  }

  ~docker_backend() override {
    creator_.reset();  // creates in flight finish
    // Whatever this master started and did not see removed goes now, running or not.
    try {
      auto left = blocking_->run<std::vector<std::string>>(
          [&](docker_engine& e, auto done) { e.containers().list("fiber.job", job_id_, std::move(done)); });
      blocking_->remove_all(left);
    } catch (const std::exception& e) {
      logf(log_level::warn, "could not remove the containers of job ", job_id_, ": ", e.what());
    }
  }

  std::string name() const override { return "docker"; }

  void check_capacity(const spawn_spec& spec) const override {
    if (rooms_.empty()) return;
    check_rooms(rooms_, spec, {"the Docker engine at " + engine_->host() + " (one host)", "GPU", "run on an engine with more"});
  }

  std::unique_ptr<job> spawn(const spawn_spec& spec) override {
    container_spec c;
    c.image = cfg_.image;
    c.cmd.push_back(spec.executable);
    c.cmd.insert(c.cmd.end(), spec.args.begin(), spec.args.end());
    for (auto& [k, v] : spec.env) c.env.push_back(k + "=" + v);
    if (!spec.secret.empty()) c.env.push_back(std::string(env_keys_file) + "=" + container_keys_file);
    c.labels = {{"fiber.job", spec.job_id.empty() ? job_id_ : spec.job_id},
                {"fiber.master", master_},
                {"fiber.process", spec.name}};
    // A durable run's worker outlives its master for reattach_grace_ms: no master's sweep of
    // orphans removes it while it runs (it ends on its own).
    if (workers_wait_for_next_master(cfg_)) c.labels["fiber.durable"] = "1";
    c.binds = binds_;
    c.network_mode = cfg_.docker_network;
    c.cpus = spec.cpu;
    c.memory_bytes = std::int64_t{spec.memory_mb} * 1024 * 1024;
    c.gpus = spec.gpu;
    c.name = container_name(job_id_, spec.name);
    // A `docker stop` of anyone's but fiber's (which names its own time) leaves a pool worker the
    // notice it hands its work back in.
    c.stop_seconds = cfg_.drain_notice_ms ? (cfg_.drain_notice_ms + 999) / 1000 : -1;
    c.init = true;  // a real init as pid 1, so the program's own signals behave as in a local child
    c.user = std::to_string(::getuid()) + ":" + std::to_string(::getgid());
    std::error_code ec;
    c.working_dir = std::filesystem::current_path(ec).string();
    logf(log_level::debug, "starting ", spec.name, " as container ", c.name, " of ", c.image);
    if (!spec.secret.empty() && engine_->plain_over_network())
      throw error(errc::spawn_failed, engine_->plain_refusal("the job's credentials for " + spec.name));
    auto run = std::make_shared<container_run>(engine_, blocking_, io_, spec.name);
    run->begin(*creator_, std::move(c), spec.secret);
    return std::make_unique<job>(std::move(run));
  }

  std::unique_ptr<job> adopt(const std::string& handle) override {
    auto state = blocking_->run<std::string>([&](docker_engine& e, auto done) { e.containers().inspect(handle, std::move(done)); });
    boost::json::error_code ec;
    auto v = boost::json::parse(state, ec);
    auto* s = !ec && v.is_object() ? v.as_object().if_contains("State") : nullptr;
    auto* running = s && s->is_object() ? s->as_object().if_contains("Running") : nullptr;
    if (!running || !running->is_bool() || !running->as_bool())
      throw error(errc::spawn_failed, "its container " + handle.substr(0, 12) + " no longer runs");
    // Only a durable run's worker: a journal naming another container does not make this master
    // follow, and at its end remove, something that is not fiber's.
    auto* config = v.as_object().if_contains("Config");
    auto* labels = config && config->is_object() ? config->as_object().if_contains("Labels") : nullptr;
    if (!labels || !labels->is_object() || !labels->as_object().contains("fiber.durable"))
      throw error(errc::spawn_failed, "container " + handle.substr(0, 12) + " is not a durable run's worker");
    auto run = std::make_shared<container_run>(engine_, blocking_, io_, "container " + handle.substr(0, 12));
    run->take_up(handle);
    return std::make_unique<job>(std::move(run));
  }

 private:
  /// A master `fiber run --backend docker` started in a container (FIBER_RUN_NAME): its workers
  /// are the container's neighbours on the same engine.
  static bool in_container() {
    const char* name = std::getenv("FIBER_RUN_NAME");
    return name && *name;
  }

  std::string pick_master_address(blocking_engine& engine) const {
    if (!cfg_.master_address.empty()) return cfg_.master_address;
    if (in_container()) {
      // Its address on the network, as the engine wrote it into the container's /etc/hosts.
      if (cfg_.docker_network == "host") return "127.0.0.1";
      addrinfo hints{}, *found = nullptr;
      hints.ai_family = AF_INET;
      if (::getaddrinfo(this_host().c_str(), nullptr, &hints, &found) == 0 && found) {
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text, sizeof text);
        ::freeaddrinfo(found);
        if (std::string(text) != "127.0.0.1" && *text) return text;
      }
      throw error(errc::config_error, "this master runs in container " + std::string(std::getenv("FIBER_RUN_NAME")) +
                                          " but cannot find its own address (host name " + this_host() +
                                          "): set the config key 'master_address' (FIBER_MASTER_ADDRESS)");
    }
    auto& host = engine_->host();
    bool local_engine = host.starts_with("unix://") || host.starts_with("tcp://127.") ||
                        host.starts_with("tcp://localhost");
    if (!local_engine)
      throw error(errc::config_error, "the Docker engine at " + host +
                                          " runs on another machine: set the config key 'master_address' "
                                          "(FIBER_MASTER_ADDRESS) to an address of this machine its containers can reach");
    if (cfg_.docker_network == "host") return "127.0.0.1";
    return engine.run<std::string>(
        [&](docker_engine& e, auto done) { e.gateway(cfg_.docker_network, std::move(done)); });
  }

  /// Containers of masters on this machine that are gone (killed before they could clean up).
  void remove_orphans(blocking_engine& engine) {
    auto labeled = engine.run<std::vector<container_summary>>(
        [](docker_engine& e, auto done) { e.containers().list_labeled("fiber.master", std::move(done)); });
    auto prefix = master_host() + ":";
    std::vector<std::string> orphans;
    for (auto& c : labeled) {
      if (c.labels.contains("fiber.durable") && c.state == "running") continue;  // it waits for its run's next master
      auto& owner = c.labels["fiber.master"];
      if (!owner.starts_with(prefix)) continue;
      int pid = std::atoi(owner.c_str() + prefix.size());
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) orphans.push_back(c.id);
    }
    if (orphans.empty()) return;
    logf(log_level::info, "removing ", orphans.size(), " container(s) left by fiber masters that ended without cleanup");
    engine.remove_all(orphans);
  }

  asio::io_context& io_;
  fiber::config cfg_;
  std::string job_id_, master_;
  std::shared_ptr<docker_engine> engine_;
  std::shared_ptr<blocking_engine> blocking_;
  std::vector<node_room> rooms_;  // empty: the engine did not say (nothing is checked)
  std::unique_ptr<creator> creator_;
  std::vector<std::string> binds_;
};

}  // namespace

std::unique_ptr<backend> make_docker_backend(asio::io_context& io, const fiber::config& cfg, const std::string& job_id) {
  return std::make_unique<docker_backend>(io, cfg, job_id);
}

}  // namespace fiber::detail
