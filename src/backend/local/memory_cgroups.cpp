#include "backend/local/memory_cgroups.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/log.hpp"

namespace fiber::detail {

namespace fs = std::filesystem;

namespace {

bool write_file(const fs::path& p, const std::string& text) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::uint64_t read_number(const fs::path& p) {
  auto text = read_file(p);
  return text.empty() ? 0 : std::strtoull(text.c_str(), nullptr, 10);
}

/// This process's memory cgroup (v1), from /proc/self/cgroup: "4:memory:/some/path".
std::string own_memory_group() {
  std::istringstream lines(read_file("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::istringstream controllers(line.substr(first + 1, second - first - 1));
    for (std::string c; std::getline(controllers, c, ',');)
      if (c == "memory") return line.substr(second + 1);
  }
  return {};
}

/// Moves what is left in `group` to `to`, then removes it; false while something stays. Groups
/// inside it go first (a nested master's, made in its worker's group and left when it was killed).
bool remove_group(const fs::path& group, const fs::path& to) {
  std::error_code ec;
  for (auto& inner : fs::directory_iterator(group, ec))
    if (inner.is_directory(ec)) remove_group(inner.path(), to);
  std::istringstream pids(read_file(group / "cgroup.procs"));
  for (std::string pid; std::getline(pids, pid);)
    if (!pid.empty()) write_file(to / "cgroup.procs", pid);
  return ::rmdir(group.c_str()) == 0 || errno == ENOENT;
}

/// Folders of masters of this host that ended without removing theirs.
void remove_stale(const fs::path& base) {
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(base, ec)) {
    auto name = entry.path().filename().string();
    if (!name.starts_with("fiber-") || !entry.is_directory(ec)) continue;
    int pid = std::atoi(name.c_str() + 6);
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    remove_group(entry.path(), base);
  }
}

}  // namespace

struct memory_cgroups::group {
  group(asio::io_context& io, fs::path d, int event_fd, int control_fd, over_fn f)
      : dir(std::move(d)), event(io, event_fd), control(control_fd), over(std::move(f)) {}
  ~group() {
    std::error_code ignored;
    event.close(ignored);
    ::close(control);
  }
  fs::path dir;
  asio::posix::stream_descriptor event;  // the eventfd the kernel signals on the group's OOM
  int control;                           // memory.oom_control, open while the event is registered
  over_fn over;
};

std::shared_ptr<memory_cgroups> memory_cgroups::make(asio::io_context& io, std::string& why_not, const fs::path& root) {
  auto own = own_memory_group();
  if (own.empty()) {
    why_not = "this process is in no v1 memory cgroup (/proc/self/cgroup names no memory controller)";
    return nullptr;
  }
  auto base = root / fs::path(own).relative_path();
  if (!fs::exists(base / "memory.limit_in_bytes")) {
    why_not = "no v1 memory controller at " + base.string();
    return nullptr;
  }
  remove_stale(base);
  auto folder = base / ("fiber-" + std::to_string(::getpid()));
  if (::mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
    why_not = "cannot make " + folder.string() + ": " + std::strerror(errno);
    return nullptr;
  }
  return std::make_shared<memory_cgroups>(io, std::move(folder));
}

memory_cgroups::memory_cgroups(asio::io_context& io, fs::path folder) : io_(io), folder_(std::move(folder)) {}

memory_cgroups::~memory_cgroups() {
  for (auto& [id, g] : groups_) remove_group(g->dir, folder_.parent_path());
  groups_.clear();
  ::rmdir(folder_.c_str());
}

std::uint64_t memory_cgroups::limit(int pid, std::uint64_t limit_mb, over_fn over) {
  auto id = next_id_++;
  auto dir = folder_ / std::to_string(id);
  if (::mkdir(dir.c_str(), 0755) != 0) {
    logf(log_level::debug, "cannot make the memory cgroup ", dir.string(), ": ", std::strerror(errno));
    return 0;
  }
  auto bytes = std::to_string(limit_mb << 20);
  int event_fd = -1, control_fd = -1;
  auto fail = [&](const char* what) -> std::uint64_t {
    logf(log_level::debug, "cannot limit pid ", pid, " by the memory cgroup ", dir.string(), ": ", what, ": ",
         std::strerror(errno));
    if (event_fd >= 0) ::close(event_fd);
    if (control_fd >= 0) ::close(control_fd);
    remove_group(dir, folder_.parent_path());
    return 0;
  };
  // What it held before it was moved moves with it (anonymous and file pages).
  (void)write_file(dir / "memory.move_charge_at_immigrate", "3");
  if (!write_file(dir / "memory.limit_in_bytes", bytes)) return fail("memory.limit_in_bytes");
  (void)write_file(dir / "memory.memsw.limit_in_bytes", bytes);  // no swap past it, where swap is accounted
  // At the limit the kernel holds the group's allocations instead of killing: fiber stops it.
  if (!write_file(dir / "memory.oom_control", "1")) return fail("memory.oom_control");
  event_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  control_fd = ::open((dir / "memory.oom_control").c_str(), O_RDONLY | O_CLOEXEC);
  if (event_fd < 0 || control_fd < 0) return fail("eventfd");
  if (!write_file(dir / "cgroup.event_control", std::to_string(event_fd) + " " + std::to_string(control_fd)))
    return fail("cgroup.event_control");
  if (!write_file(dir / "cgroup.procs", std::to_string(pid))) return fail("cgroup.procs");
  groups_.emplace(id, std::make_unique<group>(io_, dir, event_fd, control_fd, std::move(over)));
  wait_for_oom(id);
  return id;
}

void memory_cgroups::wait_for_oom(std::uint64_t id) {
  groups_.at(id)->event.async_wait(asio::posix::stream_descriptor::wait_read, [weak = weak_from_this(), id](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    auto it = self->groups_.find(id);
    if (it == self->groups_.end()) return;
    auto& g = *it->second;
    std::uint64_t count = 0;
    (void)::read(g.event.native_handle(), &count, sizeof count);
    // The event also comes when the group goes; only an OOM of the group counts.
    if (read_file(g.dir / "memory.oom_control").find("under_oom 1") == std::string::npos) return self->wait_for_oom(id);
    memory_use seen{read_number(g.dir / "memory.usage_in_bytes"), read_number(g.dir / "memory.max_usage_in_bytes")};
    if (auto f = std::move(g.over)) f(seen);
  });
}

void memory_cgroups::release(std::uint64_t id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  auto dir = it->second->dir;
  groups_.erase(it);
  if (!remove_group(dir, folder_.parent_path()))
    logf(log_level::debug, "the memory cgroup ", dir.string(), " could not be removed: ", std::strerror(errno));
}

}  // namespace fiber::detail
