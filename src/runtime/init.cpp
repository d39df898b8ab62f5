// fiber::init and the worker side of a child: handshake, run the target, report, exit.
#include <filesystem>
#include <asio/post.hpp>
#include <sys/prctl.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <typeinfo>

#include "fiber/context.hpp"
#include "core/frames_reader.hpp"
#include "core/demangle.hpp"
#include "core/remote_failure.hpp"
#include "core/malloc_tuning.hpp"
#include "core/process_title.hpp"
#include "core/worker_env.hpp"
#include "fiber/registry.hpp"
#include "core/log.hpp"
#include "backend/local/local_resources.hpp"
#include "backend/zygote.hpp"
#include "runtime/hubs/hub_process.hpp"
#include "core/build_id.hpp"
#include "runtime/runtime.hpp"
#include "runtime/init.hpp"
#include "runtime/init_guard.hpp"
#include "runtime/worker_exit.hpp"
#include "runtime/worker_hello.hpp"
#include "runtime/claim_copy_service.hpp"
#include "runtime/trust/worker_credentials.hpp"

// Under AddressSanitizer (scripts/sanitize.sh), the options every fiber process needs, children
// in containers, pods and batch jobs included, which do not all inherit ASAN_OPTIONS: Asio's
// recycling allocator frees with operator delete what it got from aligned_alloc (harmless, and
// reported), and children end by _exit, leaving what the leak checker would count.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "detect_leaks=0:alloc_dealloc_mismatch=0"; }
#endif

namespace fiber {
namespace detail {
std::shared_ptr<runtime>& worker_runtime();  // context.cpp

std::vector<std::pair<std::string, std::string>>& init_overrides();

namespace {
/// The master's answer: welcome (config, call) or refuse.
multipart await_welcome(runtime& rt) {
  std::atomic<bool> answered{false};
  multipart answer;
  rt.worker().on_first_message([&](std::error_code, multipart parts) {
    answer = std::move(parts);
    rt.loop().notify_done(answered);
  });
  rt.loop().wait_until(answered);
  return answer;
}

/// Takes the welcome's config; an exit code when the worker must leave instead.
std::optional<int> take_welcome(runtime& rt, const multipart& answer, const std::string& name) {
  if (header_of(answer, "the master").type == kind::refuse) {
    log(log_level::error, "the master refused this worker: " + (answer.size() > 1 ? answer[1].to_string() : std::string()));
    return exit_refused;
  }
  fiber::config cfg;
  try {
    cfg = welcome_config(answer);
  } catch (const std::exception& e) {
    log(log_level::error, std::string("the master's config snapshot is unreadable: ") + e.what());
    return 2;
  }
  rt.replace_config(cfg);
  // A nested master's child: the channel prefix the top master gave it (else its routing id's).
  if (auto welcome = parse_header(answer[0]); welcome && welcome->aux) rt.set_channel_prefix(welcome->aux);
  keep_freed_memory(cfg.malloc_keep_mb);
  configure_log(cfg.log_level, cfg.log_file, name);
  return std::nullopt;
}

/// The target, on this thread (its blocking calls run the event loop while they wait); what it
/// raised, if it did.
std::optional<remote_failure> run_target(const multipart& answer) {
  try {
    std::uint64_t id = 0;
    if (answer.size() < 4 || answer[2].size() != sizeof id) throw error(errc::malformed_message, "malformed start message");
    std::memcpy(&id, answer[2].data(), sizeof id);
    auto* entry = find_function(id);
    if (!entry) throw error(errc::not_registered, "function id " + std::to_string(id) + " is not registered in this worker");
    frames_reader args(answer, 3);
    writer ignored;
    entry->invoke(args.get(), ignored);
    return std::nullopt;
  } catch (...) {
    return remote_failure::of_current_exception();
  }
}

/// The end, told to the master after what the worker recorded; returns the exit code.
int report_end(std::shared_ptr<runtime> rt, const std::optional<remote_failure>& failure) {
  // Children it started and let go of without join() (non-daemon), as the master waits for its
  // own; then stop() below ends whatever it started that is still running.
  if (!rt->is_shut_down()) rt->holds().wait();
  if (failure) log(log_level::error, "target raised " + failure->type + ": " + failure->message);
  auto detail = failure ? failure->encode() : std::string();
  // What it recorded (its pools, its collectives) reaches the top master before its end does.
  rt->loop().run_sync([&] {
    rt->observer().record_last_memory();
    rt->observer().recorder().flush();
  });
  rt->worker().send_upstream(make_message(kind::done, {.aux = failure ? 1u : 0u}, detail));
  std::fflush(nullptr);
  worker_runtime().reset();
  rt->stop();
  rt.reset();  // closing the ZeroMQ context waits (linger) until what we sent is delivered
  return failure ? 1 : clean_exit_code();
}
}  // namespace

int run_worker() {
  auto name = env_or_empty(env_name);
  if (auto parent = env_or_empty(env_parent_pid); !parent.empty()) {
    // Die with the master; and if it already died before we got here, leave at once.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (std::to_string(::getppid()) != parent) return 70;
  }
  configure_log(log_level::warn, "", name.empty() ? "Worker" : name);
  // The CPUs and memory its backend gave it, before anything else runs (local backend).
  if (auto problem = apply_local_limits(); !problem.empty()) log(log_level::warn, "limits not applied: " + problem);

  job_keys keys;
  try {
    // Before any thread starts: nothing the task starts inherits where they are.
    keys = take_worker_credentials();
  } catch (const std::exception& e) {
    log(log_level::error, std::string("started as a fiber worker without valid credentials: ") + e.what());
    return 2;
  }
  auto nonce = env_or_empty(env_nonce);
  ::unsetenv(env_nonce);
  auto rt = std::make_shared<runtime>(fiber::config{}, env_or_empty(env_job), keys, env_or_empty(env_endpoint),
                                      env_or_empty(env_token));
  worker_runtime() = rt;
  send_hello(*rt, nonce);
  auto answer = await_welcome(*rt);
  if (auto leave = take_welcome(*rt, answer, name)) {
    rt->stop();
    return *leave;
  }
  auto failure = run_target(answer);
  return report_end(std::move(rt), failure);
}
}  // namespace detail

namespace detail {
namespace {
// `ps` shows the worker by the name its master gave it, not the fork server's arguments.
void name_this_worker() noexcept {
  if (const char* name = std::getenv(env_name); name && *name) name_this_process(name);
}
}  // namespace
}  // namespace detail

bool is_worker() noexcept { return std::getenv(detail::env_token) != nullptr; }

void init(int argc, char** argv, config_overrides overrides) {
  detail::remember_arguments(argc, argv);
  bool marked = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == detail::worker_flag) marked = true;
    if (std::string_view(argv[i]) == detail::zygote_flag) {
      const char* fd = std::getenv(detail::env_zygote_fd);
      if (!fd) {
        std::fprintf(stderr, "fiber: %s is for fiber's own use\n", detail::zygote_flag);
        std::_Exit(2);
      }
      detail::prepare_hello_and_welcome();
      detail::run_zygote(std::atoi(fd), [] {
        detail::name_this_worker();
        detail::exit_worker(detail::run_worker());
      });
    }
  }
  if (detail::is_claim_copy_service()) detail::exit_worker(detail::serve_claim_copies());
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == detail::hub_flag) detail::exit_worker(detail::run_hub_process());
  if (marked || is_worker()) {
    detail::name_this_worker();
    detail::exit_worker(detail::run_worker());
  }
  detail::init_was_called() = true;
  auto& stored = detail::init_overrides();
  for (auto& [k, v] : overrides) stored.emplace_back(std::string(k), std::string(v));
  (void)config::load(stored);  // report a bad key now, not at first use
}

}  // namespace fiber
