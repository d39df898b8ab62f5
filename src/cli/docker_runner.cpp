#include "cli/docker_runner.hpp"

#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>

#include "core/private_files.hpp"
#include "backend/backend.hpp"
#include "backend/docker/blocking_engine.hpp"
#include "backend/docker/docker_engine.hpp"
#include "cli/claim_copy.hpp"
#include "cli/container_follow.hpp"
#include "cli/image_plan.hpp"
#include "cli/tar_archive.hpp"
#include "cli/run_names.hpp"
#include "cli/run_standing.hpp"
#include "core/flight_recorder.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "transport/http_client.hpp"
#include "transport/run_until.hpp"

namespace fiber::cli {
namespace fs = std::filesystem;
using detail::container_spec;
using detail::container_summary;
using detail::docker_engine;

namespace {

constexpr const char* run_label = "fiber.run";    // on a master container: the run's name
constexpr const char* user_label = "fiber.user";  // who started it
constexpr const char* master_label = "fiber.master";
constexpr const char* helper_label = "fiber.helper";  // fiber cp's container, removed when it is done
constexpr const char* cp_helper_image = "fiber/cp-helper:1";

/// "-v CLAIM[:PATH][:ro]" → "CLAIM:PATH[:ro]", the path /persistent unless given.
/// Where the master container keeps the run's recording: this host's record folder, bound there.
constexpr std::string_view master_record_dir = "/var/lib/fiber/runs";

/// This host's record folder, to bind into the master's container so that its recording lands
/// here, where `fiber history` and `fiber trace` read it after the container is gone; empty where
/// it cannot or should not be: an engine on another host (a path here means nothing there),
/// recording off, or the run given a record folder or switch of its own (-e FIBER_RECORD...).
std::string record_binding(const std::string& engine_host, const std::vector<std::string>& env) {
  if (!engine_host.starts_with("unix://")) return {};
  for (auto& kv : env)
    if (kv.starts_with("FIBER_RECORD_DIR=") || kv.starts_with("FIBER_RECORD=")) return {};
  auto cfg = config::load();
  if (!cfg.record) return {};
  std::string dir;
  try {
    dir = detail::record_folder(cfg);
  } catch (const error&) {
    return {};  // no HOME: the run records inside its container, as it would without this
  }
  std::error_code ec;
  detail::make_private_folder(dir, ec);
  if (ec) return {};  // the run records inside its container, as it would without this
  return fs::absolute(dir).string();
}

void print_output(int stream, std::string_view out) {
  std::fwrite(out.data(), 1, out.size(), stream == 2 ? stderr : stdout);
  std::fflush(stream == 2 ? stderr : stdout);
}

std::string volume_bind(const std::string& v) {
  std::string claim = v, path = "/persistent", ro;
  if (claim.ends_with(":ro")) {
    ro = ":ro";
    claim.resize(claim.size() - 3);
  }
  if (auto colon = claim.find(':'); colon != std::string::npos) {
    path = claim.substr(colon + 1);
    claim.resize(colon);
  }
  bool named = !claim.empty() && std::isalnum(static_cast<unsigned char>(claim[0]));
  for (char c : claim) named = named && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  if (!named || !path.starts_with("/"))
    throw error(errc::config_error, "-v " + v +
                                        " is not CLAIM[:PATH][:ro]: CLAIM names a volume (letters, digits, '_', '.', "
                                        "'-'), PATH is absolute (default /persistent)");
  return claim + ":" + path + ro;
}

/// The run a worker container belongs to: fiber.master is "<master host>:<pid>", and a `fiber run`
/// master names its run there (FIBER_RUN_NAME).
std::string master_host(const container_summary& c) {
  auto it = c.labels.find(master_label);
  if (it == c.labels.end()) return {};
  return it->second.substr(0, it->second.rfind(':'));
}

}  // namespace

struct docker_runner::session {
  detail::blocking_engine blocking{std::string{}};
  docker_engine& engine = blocking.engine();

  /// One engine operation, to completion; fiber::error with the engine's words when it fails.
  template <class T, class Start>
  T call(Start start) {
    return blocking.run<T>(std::move(start));
  }

  std::vector<container_summary> labeled(const char* key) {
    return call<std::vector<container_summary>>([&](docker_engine& e, auto done) { e.containers().list_labeled(key, std::move(done)); });
  }

  /// This user's master container of run `name`; fiber::error naming `fiber ps` when none.
  container_summary master(const std::string& name) {
    for (auto& c : labeled(run_label))
      if (c.labels[run_label] == name && c.labels[user_label] == user_name()) return c;
    throw error(errc::config_error, "no run named '" + name + "' on the Docker engine at " + engine.host() +
                                        ": `fiber ps` lists yours");
  }

  std::vector<container_summary> workers_of(const std::string& name) {
    std::vector<container_summary> out;
    for (auto& c : labeled(master_label))
      if (master_host(c) == name) out.push_back(c);
    return out;
  }
};

docker_runner::docker_runner() : s_(std::make_unique<session>()) {}
docker_runner::~docker_runner() = default;

namespace {

/// A run as a container on the engine, beside the workers it starts there.
class docker_launch final : public launch {
 public:
  docker_launch(docker_runner::session& s, const run_options& o, image_plan image, std::string name, container_spec c)
      : launch(std::move(name)), s_(s), o_(o), image_(std::move(image)), c_(std::move(c)) {}

  boost::json::object plan() const override {
    auto c = c_;
    c.env.push_back("FIBER_IMAGE=" + image_.ref);
    boost::json::object plan;
    if (image_.context) plan["build"] = describe_build(image_, o_);
    plan["engine"] = s_.engine.host();
    plan["create"] = boost::json::parse(detail::container_create_body(c));
    return plan;
  }

  void prepare() override {
    s_.call<std::string>([](docker_engine& e, auto done) { e.check(std::move(done)); });
    build_and_push(image_, o_, s_.blocking, /*must_be_local=*/true);
    c_.image = image_.ref;
    c_.env.push_back("FIBER_IMAGE=" + image_.ref);
  }

  std::string create() override {
    id_ = s_.call<std::string>([&](docker_engine& e, auto done) { e.containers().create(c_, std::move(done)); });
    s_.call<bool>([&](docker_engine& e, auto done) { e.containers().start(id_, std::move(done)); });
    return "started " + name() + " (container " + id_.substr(0, 12) + ", image " + image_.ref + ")";
  }

  std::optional<int> follow(bool attach) override {
    if (!attach) return 0;
    // Its output as it comes, then its exit code, through the engine's restarts of a durable
    // master. Ctrl-C leaves it running.
    bool detached = false;
    asio::signal_set signals(s_.blocking.io(), SIGINT, SIGTERM);
    signals.async_wait([&](std::error_code ec, int) {
      if (!ec) detached = true;
    });
    return container_follow(s_.blocking, id_, print_output).run(detached);
  }

 private:
  docker_runner::session& s_;
  const run_options& o_;
  image_plan image_;
  container_spec c_;
  std::string id_;
};

}  // namespace

std::unique_ptr<launch> docker_runner::plan_run(const run_options& o) {
  auto image = plan_image(o);
  auto name = o.name.empty() ? default_run_name(o.command[0]) : o.name;
  check_run_name(name);

  container_spec c;
  c.image = image.ref;  // replaced by repo@digest once pushed
  c.cmd = image.command;
  c.name = name;
  c.init = true;
  c.restarts = o.restarts;  // a durable master the engine starts again takes its run up
  c.cpus = o.cpu;
  c.memory_bytes = o.memory_bytes;
  c.gpus = o.gpu;
  // The master and its workers share a network; on the default bridge the master listens on its
  // own address there (host networking would need the host's ports).
  const char* network = std::getenv("FIBER_DOCKER_NETWORK");
  c.network_mode = network && *network ? network : "bridge";
  c.labels = {{run_label, name}, {user_label, user_name()}};
  std::string volumes;
  for (auto& v : o.volumes) {
    auto bind = volume_bind(v);
    c.binds.push_back(bind);
    volumes += (volumes.empty() ? "" : ",") + bind;
  }
  auto& host = s_->engine.host();
  if (host.starts_with("unix://")) c.binds.push_back(host.substr(7) + ":/var/run/docker.sock");
  else c.env.push_back("DOCKER_HOST=" + host);
  if (auto runs = record_binding(host, o.env); !runs.empty()) {
    c.binds.push_back(runs + ":" + std::string(master_record_dir));
    c.env.push_back("FIBER_RECORD_DIR=" + std::string(master_record_dir));
  }
  c.env.emplace_back("FIBER_BACKEND=docker");
  c.env.push_back("FIBER_RUN_NAME=" + name);
  if (!volumes.empty()) c.env.push_back("FIBER_VOLUMES=" + volumes);
  c.env.push_back("FIBER_DOCKER_NETWORK=" + c.network_mode);
  for (auto& kv : o.env) c.env.push_back(kv);
  return std::make_unique<docker_launch>(*s_, o, std::move(image), std::move(name), std::move(c));
}

int docker_runner::ps() {
  auto masters = s_->labeled(run_label);
  auto workers = s_->labeled(master_label);
  std::printf("%-32s %-10s %-28s %-6s %s\n", "NAME", "STATE", "STATUS", "AGE", "WORKERS");
  for (auto& c : masters) {
    if (c.labels[user_label] != user_name()) continue;
    auto name = c.labels[run_label];
    int running = 0;
    for (auto& w : workers)
      if (master_host(w) == name && w.state == "running") ++running;
    // A master its engine starts again (a durable run's restart policy): resuming, then its count.
    int restarts = 0;
    if (c.state == "running" || c.state == "restarting") {
      auto inspected = boost::json::parse(s_->call<std::string>([&](docker_engine& e, auto done) { e.containers().inspect(c.id, std::move(done)); }));
      if (auto* n = inspected.as_object().if_contains("RestartCount")) restarts = static_cast<int>(n->to_number<std::int64_t>());
    }
    auto state = run_state(c.state, restarts, c.state == "restarting");
    auto status = with_restarts(c.status, restarts);
    std::printf("%-32s %-10s %-28s %-6s %d\n", name.c_str(), state.c_str(), status.c_str(), age_since(c.created).c_str(),
                running);
  }
  return 0;
}

int docker_runner::logs(const logs_options& o) {
  auto m = s_->master(o.name);
  auto id = m.id;
  if (!o.process.empty()) {
    id.clear();
    for (auto& w : s_->workers_of(o.name))
      if (w.labels["fiber.process"] == o.process) id = w.id;
    if (id.empty())
      throw error(errc::config_error, "run " + o.name + " has no process '" + o.process +
                                          "' now (a worker's container goes when it ends): `fiber ps` shows its workers");
  }
  if (!o.follow) {
    auto text = s_->call<std::string>([&](docker_engine& e, auto done) { e.containers().logs(id, std::move(done)); });
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  bool never = false;
  (void)container_follow(s_->blocking, id, print_output).run(never);
  return 0;
}

int docker_runner::stop(const std::string& name) {
  auto m = s_->master(name);
  // SIGTERM first: the master removes its workers itself; what it leaves goes after.
  s_->call<bool>([&](docker_engine& e, auto done) { e.containers().stop(m.id, 10, std::move(done)); });
  int removed = 0;
  for (auto& w : s_->workers_of(name)) {
    s_->call<bool>([&](docker_engine& e, auto done) { e.containers().remove(w.id, true, std::move(done)); });
    ++removed;
  }
  s_->call<bool>([&](docker_engine& e, auto done) { e.containers().remove(m.id, true, std::move(done)); });
  std::fprintf(stderr, "fiber: stopped %s%s\n", name.c_str(),
               removed ? (" (and removed " + std::to_string(removed) + " worker container(s) it left)").c_str() : "");
  return 0;
}

int docker_runner::gc() {
  // Ended masters of this user's runs, and workers whose master is gone: a `fiber run` master
  // that is not running, or a master on this machine whose process has ended.
  std::map<std::string, std::string> run_state;  // run name → state
  std::vector<std::string> doomed;
  for (auto& c : s_->labeled(run_label)) {
    run_state[c.labels[run_label]] = c.state;
    if (c.labels[user_label] == user_name() && c.state != "running" && c.state != "created" && c.state != "restarting") {
      doomed.push_back(c.id);
      std::printf("removing ended run %s (%s)\n", c.labels[run_label].c_str(), c.status.c_str());
    }
  }
  auto me = detail::master_host();
  for (auto& w : s_->labeled(master_label)) {
    auto host = master_host(w);
    auto& mark = w.labels[master_label];
    bool gone = false;
    if (auto it = run_state.find(host); it != run_state.end()) gone = it->second != "running";
    else if (host == me) {
      int pid = std::atoi(mark.c_str() + host.size() + 1);
      gone = pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
    }
    if (!gone) continue;
    doomed.push_back(w.id);
    std::printf("removing worker %s of ended master %s\n", w.labels["fiber.process"].c_str(), mark.c_str());
  }
  for (auto& id : doomed)
    try {
      s_->call<bool>([&](docker_engine& e, auto done) { e.containers().remove(id, true, std::move(done)); });
    } catch (const error& e) {
      if (!detail::benign_remove_error(e.what())) throw;
    }
  std::printf("%zu container(s) removed\n", doomed.size());
  return 0;
}

int docker_runner::cp(const copy_options& o) {
  if (!o.image.empty() || !o.program.empty())
    throw error(errc::config_error, "--image and --program choose the helper pod of fiber cp on Kubernetes; on Docker "
                                    "the engine copies itself: leave them out");
  auto plan = plan_copy(o.src, o.dst);
  auto& host = s_->engine.host();
  if (!s_->call<bool>([&](docker_engine& e, auto done) { e.volumes().has(plan.claim, std::move(done)); }))
    throw error(errc::config_error, "no volume named '" + plan.claim + "' on the Docker engine at " + host +
                                        ": `fiber run -v " + plan.claim + " ...` creates it (or `docker volume create " +
                                        plan.claim + "`)");
  // A container that mounts the claim and never runs: the engine itself reads and writes the
  // archive, so the image needs nothing (an empty one, imported once).
  if (!s_->call<bool>([&](docker_engine& e, auto done) { e.images().has(cp_helper_image, std::move(done)); })) {
    tar_writer empty;
    empty.directory("claim", 0755);
    s_->call<bool>([&](docker_engine& e, auto done) { e.images().import_root(empty.finish(), cp_helper_image, std::move(done)); });
  }
  container_spec c;
  c.image = cp_helper_image;
  c.cmd = {"/never-started"};
  c.network_mode = "none";
  c.binds = {plan.claim + ":/claim"};
  c.labels = {{helper_label, "cp"}, {user_label, user_name()}};
  auto id = s_->call<std::string>([&](docker_engine& e, auto done) { e.containers().create(c, std::move(done)); });
  struct removed_at_end {
    detail::blocking_engine& b;
    std::string id;
    ~removed_at_end() { b.remove_all({id}); }
  } helper{s_->blocking, id};
  if (plan.upload) {
    tar_writer t;
    t.tree(plan.local, plan.in_claim);
    s_->call<bool>([&](docker_engine& e, auto done) { e.containers().put_archive(id, "/claim", t.finish(), std::move(done)); });
    std::fprintf(stderr, "fiber: copied %s to %s:/%s\n", o.src.c_str(), plan.claim.c_str(), plan.in_claim.c_str());
    return 0;
  }
  std::string tar;
  try {
    tar = s_->call<std::string>([&](docker_engine& e, auto done) { e.containers().get_archive(id, "/claim/" + plan.in_claim, std::move(done)); });
  } catch (const error& e) {
    if (std::string(e.what()).find("HTTP 404") == std::string::npos) throw;
    throw error(errc::config_error, "claim " + plan.claim + " has no '" + plan.in_claim + "': `fiber cp " + plan.claim +
                                        ":/ DIR` copies all of it");
  }
  fs::create_directories(plan.local_parent);
  auto n = extract_tar(tar, plan.local_parent, plan.local_name);
  std::fprintf(stderr, "fiber: copied %s to %s (%zu %s)\n", o.src.c_str(), (plan.local_parent / plan.local_name).c_str(), n,
               n == 1 ? "entry" : "entries");
  return 0;
}

}  // namespace fiber::cli

namespace fiber::cli {

std::string docker_runner::master_output(const std::string& name) {
  auto m = s_->master(name);
  return s_->call<std::string>([&](docker_engine& e, auto done) { e.containers().logs(m.id, std::move(done)); });
}

dashboard_route docker_runner::route_to_master(const std::string& name, int port) {
  auto m = s_->master(name);
  if (m.state != "running")
    throw error(errc::config_error, "run " + name + "'s master is " + m.state + ", not running: its page went with it");
  // Its address on its network (this host reaches the engine's bridge networks); with the host's
  // network, this host's own.
  auto inspected = boost::json::parse(s_->call<std::string>([&](docker_engine& e, auto done) { e.containers().inspect(m.id, std::move(done)); }));
  std::string address;
  auto& settings = inspected.at("HostConfig").as_object();
  if (auto* mode = settings.if_contains("NetworkMode"); mode && mode->is_string() && mode->as_string() == "host")
    address = "127.0.0.1";
  else if (auto* nets = inspected.at("NetworkSettings").as_object().if_contains("Networks"); nets && nets->is_object())
    for (auto& [net, v] : nets->as_object())
      if (auto* ip = v.as_object().if_contains("IPAddress"); address.empty() && ip && ip->is_string() && !ip->as_string().empty())
        address = std::string(ip->as_string());
  if (address.empty())
    throw error(errc::config_error, "run " + name + "'s master container has no address on a network this host reaches");
  return [base = "http://" + address + ":" + std::to_string(port)](detail::http_request& req, const std::string& target) {
    req.url = base + target;
  };
}

}  // namespace fiber::cli
