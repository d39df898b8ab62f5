#include "fiber/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>

#include <asio/ip/address.hpp>

#include "core/volume.hpp"
#include "fiber/error.hpp"

extern char** environ;

namespace fiber {
namespace {

[[noreturn]] void bad_value(std::string_view key, std::string_view value, std::string_view expected) {
  throw error(errc::config_error, "config key '" + std::string(key) + "': bad value '" + std::string(value) +
                                      "', expected " + std::string(expected));
}

template <class Int>
Int parse_int(std::string_view key, std::string_view v, Int lo, Int hi) {
  Int out{};
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc{} || p != v.data() + v.size() || out < lo || out > hi)
    bad_value(key, v, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return out;
}

const char* level_text(log_level l) {
  static const char* names[] = {"trace", "debug", "info", "warn", "error", "off"};
  return names[static_cast<int>(l)];
}

struct key_def {
  std::string_view name;
  std::function<void(config&, std::string_view)> set;
  std::function<std::string(const config&)> get;
};

template <class Int>
key_def int_key(std::string_view name, Int config::*field, Int lo, Int hi) {
  return {name, [=](config& c, std::string_view v) { c.*field = parse_int<Int>(name, v, lo, hi); },
          [=](const config& c) { return std::to_string(c.*field); }};
}
key_def bool_key(std::string_view name, bool config::*field) {
  return {name,
          [=](config& c, std::string_view v) {
            if (v == "true" || v == "1" || v == "yes" || v == "on") c.*field = true;
            else if (v == "false" || v == "0" || v == "no" || v == "off") c.*field = false;
            else bad_value(name, v, "true or false");
          },
          [=](const config& c) { return std::string(c.*field ? "true" : "false"); }};
}
key_def string_key(std::string_view name, std::string config::*field) {
  return {name, [=](config& c, std::string_view v) { c.*field = std::string(v); },
          [=](const config& c) { return c.*field; }};
}

/// One of a few words: `choices` lists them, `words` says them in an error.
key_def choice_key(std::string_view name, std::string config::*field, std::initializer_list<std::string_view> choices,
                   std::string_view words) {
  std::vector<std::string_view> allowed(choices);
  return {name,
          [=](config& c, std::string_view v) {
            if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) bad_value(name, v, std::string(words));
            c.*field = std::string(v);
          },
          [=](const config& c) { return c.*field; }};
}

/// A Kubernetes CPU quantity above zero: a decimal number of cores, or of millicores with 'm'.
key_def cpu_quantity_key(std::string_view name, std::string config::*field) {
  return {name,
          [=](config& c, std::string_view v) {
            if (v.empty()) return void(c.*field = {});  // unset: requests = limits
            auto number = v.ends_with('m') ? v.substr(0, v.size() - 1) : v;
            bool digits = !number.empty(), dot = false, nonzero = false;
            for (char ch : number) {
              if (ch == '.' && !dot && !v.ends_with('m')) dot = true;
              else if (std::isdigit(static_cast<unsigned char>(ch))) nonzero |= ch != '0';
              else digits = false;
            }
            if (!digits || !nonzero || number == ".")
              bad_value(name, v, "a CPU amount above zero as Kubernetes writes it: 100m (millicores), 0.5 or 2");
            c.*field = std::string(v);
          },
          [=](const config& c) { return c.*field; }};
}

/// A value passed as one Slurm option: no white space (it would split into two arguments).
key_def slurm_word_key(std::string_view name, std::string config::*field) {
  return {name,
          [=](config& c, std::string_view v) {
            if (std::any_of(v.begin(), v.end(), [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); }))
              bad_value(name, v, "one word without spaces");
            c.*field = std::string(v);
          },
          [=](const config& c) { return c.*field; }};
}

/// A Kubernetes namespace's name (empty: the master pod's, or the kubeconfig context's).
key_def kubernetes_namespace_key() {
  return {"kubernetes_namespace",
          [](config& c, std::string_view v) {
            if (!v.empty() && (v.size() > 63 || !std::all_of(v.begin(), v.end(), [](char ch) {
                  return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
                }) || v.front() == '-' || v.back() == '-'))
              bad_value("kubernetes_namespace", v, "a namespace name: lower-case letters, digits and '-', at most 63");
            c.kubernetes_namespace = std::string(v);
          },
          [](const config& c) { return c.kubernetes_namespace; }};
}

/// How much fiber logs: a level by its name.
key_def log_level_key() {
  return {"log_level",
          [](config& c, std::string_view v) {
            for (int i = 0; i <= static_cast<int>(log_level::off); ++i)
              if (v == level_text(static_cast<log_level>(i))) {
                c.log_level = static_cast<log_level>(i);
                return;
              }
            bad_value("log_level", v, "one of trace, debug, info, warn, error, off");
          },
          [](const config& c) { return std::string(level_text(c.log_level)); }};
}

/// A durable run's name: it names the journal's file, so nothing that could leave journal_dir or
/// hide in a listing. Empty: one is made when the run starts.
key_def run_id_key() {
  return {"run_id",
          [](config& c, std::string_view v) {
            bool ok = v.empty() || (v.size() <= 64 && v.front() != '.' && v.front() != '-' &&
                                    v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
                                        std::string_view::npos);
            if (!ok) bad_value("run_id", v, "up to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'");
            c.run_id = std::string(v);
          },
          [](const config& c) { return c.run_id; }};
}

key_def volumes_key() {
  return {"volumes",
          [](config& c, std::string_view v) {
            detail::parse_volumes(v);  // validates
            c.volumes = std::string(v);
          },
          [](const config& c) { return c.volumes; }};
}

key_def docker_network_key() {
  return {"docker_network",
          [](config& c, std::string_view v) {
            if (v.empty()) bad_value("docker_network", v, "host, bridge or the name of a Docker network");
            c.docker_network = std::string(v);
          },
          [](const config& c) { return c.docker_network; }};
}

key_def dashboard_address_key() {
  return {"dashboard_address",
          [](config& c, std::string_view v) {
            std::error_code ec;
            (void)asio::ip::make_address(std::string(v), ec);
            if (ec) bad_value("dashboard_address", v, "an IP address of this host, such as 127.0.0.1 (this host only) or 0.0.0.0 (every address)");
            c.dashboard_address = std::string(v);
          },
          [](const config& c) { return c.dashboard_address; }};
}

key_def gpus_key() {
  return {"gpus",
          [](config& c, std::string_view v) {
            if (v.empty() || v.find_first_of(" \t") != std::string_view::npos || v.front() == ',' || v.back() == ',' ||
                v.find(",,") != std::string_view::npos)
              bad_value("gpus", v, "auto, none, or a comma-separated list of device ids such as 0,1");
            c.gpus = std::string(v);
          },
          [](const config& c) { return c.gpus; }};
}

key_def slurm_time_limit_key() {
  return {"slurm_time_limit",
          [](config& c, std::string_view v) {
            if (!std::all_of(v.begin(), v.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) || ch == ':' || ch == '-'; }))
              bad_value("slurm_time_limit", v, "a Slurm time: minutes, MM:SS, HH:MM:SS, D-HH or D-HH:MM:SS");
            c.slurm_time_limit = std::string(v);
          },
          [](const config& c) { return c.slurm_time_limit; }};
}

}  // namespace

namespace {

const std::vector<key_def>& key_table() {
  constexpr int int_max = std::numeric_limits<int>::max();
  static const std::vector<key_def> table = {
      choice_key("backend", &config::backend, {"local", "docker", "kubernetes", "slurm"},
                 "one of local, docker, kubernetes, slurm"),
      string_key("image", &config::image),
      log_level_key(),
      string_key("log_file", &config::log_file),
      int_key("cpu_per_job", &config::cpu_per_job, 1, 4096),
      int_key("mem_per_job", &config::mem_per_job, 0, int_max),
      choice_key("local_memory_limit", &config::local_memory_limit, {"auto", "watch"}, "auto or watch"),
      int_key("memory_poll_ms", &config::memory_poll_ms, 1, 3600000),
      bool_key("retry_memory_exceeded", &config::retry_memory_exceeded),
      int_key("outside_deaths_ms", &config::outside_deaths_ms, 0, int_max),
      int_key("drain_notice_ms", &config::drain_notice_ms, 0, 24 * 3600 * 1000),
      int_key<std::uint64_t>("memory_budget_mb", &config::memory_budget_mb, 0, std::uint64_t{1} << 40),
      volumes_key(),
      docker_network_key(),
      string_key("master_address", &config::master_address),
      int_key("heartbeat_interval_ms", &config::heartbeat_interval_ms, 1, int_max),
      int_key("heartbeat_timeout_ms", &config::heartbeat_timeout_ms, 1, int_max),
      string_key("executable", &config::executable),
      int_key<std::uint64_t>("max_message_bytes", &config::max_message_bytes, 1, std::numeric_limits<std::uint64_t>::max()),
      int_key<std::uint64_t>("shared_cache_bytes", &config::shared_cache_bytes, 0, std::numeric_limits<std::uint64_t>::max()),
      int_key("start_timeout_ms", &config::start_timeout_ms, 1, int_max),
      int_key("max_depth", &config::max_depth, 1, 64),
      int_key("terminate_grace_ms", &config::terminate_grace_ms, 0, int_max),
      int_key<std::uint64_t>("malloc_keep_mb", &config::malloc_keep_mb, 0, std::uint64_t{1} << 20),
      int_key("idle_trim_ms", &config::idle_trim_ms, 0, int_max),
      int_key("wait_spin_us", &config::wait_spin_us, 0, 1000000),
      int_key("shared_links", &config::shared_links, 0, 1000000),
      bool_key("record", &config::record),
      string_key("record_dir", &config::record_dir),
      int_key<std::uint64_t>("record_max_bytes", &config::record_max_bytes, 4096, std::numeric_limits<std::uint64_t>::max()),
      int_key("record_keep", &config::record_keep, 1, 1000000),
      int_key("record_memory_ms", &config::record_memory_ms, 0, int_max),
      int_key("record_manager_calls", &config::record_manager_calls, 0, int_max),
      bool_key("durable", &config::durable),
      run_id_key(),
      string_key("journal_dir", &config::journal_dir),
      int_key("journal_sync_ms", &config::journal_sync_ms, 1, int_max),
      int_key<std::uint64_t>("journal_max_bytes", &config::journal_max_bytes, 4096, std::numeric_limits<std::uint64_t>::max()),
      int_key("reattach_grace_ms", &config::reattach_grace_ms, 0, int_max),
      bool_key("dashboard", &config::dashboard),
      dashboard_address_key(),
      int_key("dashboard_port", &config::dashboard_port, 0, 65535),
      int_key("dashboard_interval_ms", &config::dashboard_interval_ms, 50, 3600000),
      gpus_key(),
      choice_key("start_method", &config::start_method, {"forkserver", "spawn"}, "forkserver or spawn"),
      choice_key("encryption", &config::encryption, {"auto", "always"}, "auto or always"),
      choice_key("local_transport", &config::local_transport, {"direct", "zeromq"}, "direct or zeromq"),
      choice_key("remote_transport", &config::remote_transport, {"direct", "hub", "zeromq"}, "direct, hub or zeromq"),
      choice_key("hub_workers", &config::hub_workers, {"engine", "fork"}, "engine or fork"),
      kubernetes_namespace_key(),
      string_key("kubernetes_context", &config::kubernetes_context),
      string_key("kubernetes_gpu_resource", &config::kubernetes_gpu_resource),
      cpu_quantity_key("kubernetes_cpu_request", &config::kubernetes_cpu_request),
      string_key("kubernetes_pod_patch", &config::kubernetes_pod_patch),
      string_key("kubernetes_service_account", &config::kubernetes_service_account),
      int_key("kubernetes_pending_timeout_ms", &config::kubernetes_pending_timeout_ms, 1, int_max),
      int_key("kubernetes_stop_timeout_ms", &config::kubernetes_stop_timeout_ms, 0, int_max),
      bool_key("kubernetes_autoscaling", &config::kubernetes_autoscaling),
      int_key("kubernetes_qps", &config::kubernetes_qps, 1, 100000),
      int_key("kubernetes_burst", &config::kubernetes_burst, 1, 100000),
      choice_key("slurm_mode", &config::slurm_mode, {"auto", "steps", "batch"}, "auto, steps or batch"),
      slurm_word_key("slurm_partition", &config::slurm_partition),
      slurm_word_key("slurm_account", &config::slurm_account),
      slurm_word_key("slurm_qos", &config::slurm_qos),
      slurm_time_limit_key(),
      slurm_word_key("slurm_constraint", &config::slurm_constraint),
      string_key("slurm_sbatch_args", &config::slurm_sbatch_args),
      string_key("slurm_srun_args", &config::slurm_srun_args),
      int_key("slurm_pending_timeout_ms", &config::slurm_pending_timeout_ms, 0, int_max),
      int_key("slurm_jobs_per_pass", &config::slurm_jobs_per_pass, 0, int_max),
      string_key("slurm_dir", &config::slurm_dir),
  };
  return table;
}

/// Edits (insert, delete, replace) from `a` to `b`: how close a misspelt key is to a known one.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

const key_def& find_key(std::string_view key, std::string_view source) {
  for (auto& k : key_table())
    if (k.name == key) return k;
  // The nearest known key, when it is near enough to be a slip (a third of its letters at most).
  const key_def* nearest = nullptr;
  std::size_t best = key.size() / 3 + 1;
  for (auto& k : key_table())
    if (auto d = edit_distance(key, k.name); d < best) best = d, nearest = &k;
  std::string known;
  for (auto& k : key_table()) known += (known.empty() ? "" : ", ") + std::string(k.name);
  throw error(errc::config_error, "unknown config key '" + std::string(key) + "' in " + std::string(source) +
                                      (nearest ? ": did you mean '" + std::string(nearest->name) + "'?" : "") +
                                      "; known keys: " + known);
}

/// Sets `key` from `source` (a file and line, an environment variable, code): a bad value's error
/// says where it came from, so that a user finds the setting to mend.
void set_from(config& c, std::string_view key, std::string_view value, const std::string& source) {
  auto& k = find_key(key, source);
  try {
    k.set(c, value);
  } catch (const error& e) {
    throw error(e.code(), e.reason() + " (set in " + source + ")");
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Environment variables that are not configuration keys: what fiber sets for its own children,
// the pod facts a Kubernetes pod gets from the downward API, the container a `fiber run` master
// runs in, the fiber command's default registry, fiber cp's helper (runtime/claim_copy_service),
// the config file's path, and the test command's switch for engines (scripts/test.sh).
bool internal_env(std::string_view name) {
  return name.starts_with("FIBER_WORKER") || name == "FIBER_CONFIG_FILE" || name.starts_with("FIBER_INTERNAL_") ||
         name.starts_with("FIBER_POD_") || name == "FIBER_RUN_NAME" || name == "FIBER_REGISTRY" ||
         name == "FIBER_REQUIRE_ENGINES" || name.starts_with("FIBER_CLAIM_COPY_");
}

void apply_file(config& c, const std::string& path, bool must_exist) {
  std::ifstream in(path);
  if (!in) {
    if (must_exist) throw error(errc::config_error, "config file '" + path + "' (FIBER_CONFIG_FILE) cannot be read");
    return;
  }
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    auto s = trim(line);
    if (s.empty() || s.front() == '#' || s.front() == '[') continue;
    auto eq = s.find('=');
    auto where = path + ":" + std::to_string(lineno);
    if (eq == std::string_view::npos)
      throw error(errc::config_error, "config file " + where + ": expected 'key = value', got '" + std::string(s) + "'");
    auto key = trim(s.substr(0, eq));
    set_from(c, key, trim(s.substr(eq + 1)), "config file " + where);
  }
}

void apply_environment(config& c) {
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    if (!kv.starts_with("FIBER_")) continue;
    auto eq = kv.find('=');
    auto name = kv.substr(0, eq);
    if (internal_env(name)) continue;
    std::string key(name.substr(6));
    for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    set_from(c, key, eq == std::string_view::npos ? "" : kv.substr(eq + 1), "environment variable " + std::string(name));
  }
}

}  // namespace

void config::set(std::string_view key, std::string_view value) { set_from(*this, key, value, "code"); }

std::string config::get(std::string_view key) const { return find_key(key, "code").get(*this); }

std::vector<std::pair<std::string, std::string>> config::items() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& k : key_table()) out.emplace_back(std::string(k.name), k.get(*this));
  return out;
}

const std::vector<std::string_view>& config::keys() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (auto& k : key_table()) v.push_back(k.name);
    return v;
  }();
  return names;
}

config config::load(config_overrides overrides) {
  std::vector<std::pair<std::string, std::string>> v;
  for (auto& [k, val] : overrides) v.emplace_back(std::string(k), std::string(val));
  return load(v);
}

config config::load(const std::vector<std::pair<std::string, std::string>>& overrides) {
  config c;
  if (const char* file = std::getenv("FIBER_CONFIG_FILE"))
    apply_file(c, file, true);
  else
    apply_file(c, ".fiberconfig", false);
  apply_environment(c);
  for (auto& [k, v] : overrides) set_from(c, k, v, "code");
  return c;
}

}  // namespace fiber
