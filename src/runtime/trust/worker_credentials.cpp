#include "runtime/trust/worker_credentials.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/worker_env.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {
namespace {

/// At most this much is read: credentials are under 200 bytes, and the file is not a peer's.
constexpr std::size_t most_bytes = 4096;

std::string read_credentials(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw error(errc::protocol_error, "cannot open the credentials file " + path + " (" + std::strerror(errno) +
                                          "); only fiber starts workers, and their master must still run");
  std::string text(most_bytes, '\0');
  std::size_t got = 0;
  for (;;) {
    auto n = ::pread(fd, text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
    if (got == text.size()) break;
  }
  ::close(fd);
  text.resize(got);
  return text;
}

}  // namespace

job_keys take_worker_credentials() {
  auto file = env_or_empty(env_keys_file);
  ::unsetenv(env_keys_file);
  if (!file.empty()) return job_keys::from_worker_text(read_credentials(file));
  throw error(errc::protocol_error, std::string("no credentials: ") + env_keys_file +
                                        " is not set; only fiber starts workers (run this program itself, not with "
                                        "--fiber-worker or FIBER_WORKER_TOKEN)");
}

}  // namespace fiber::detail
