// OpenSSL's globals outlast the process's statics: fiber asks, before main(), that OpenSSL register
// no exit handler. Freed by that handler, a master's links (destroyed by static destructors that
// run after it) used freed memory, a crash at exit now and then. A child process registers a
// handler of its own first, so that it runs after any registered later, makes a TLS session, and
// ends: its handler finds OpenSSL still up.
#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "transport/tls_session.hpp"
#include "tls_handshake.hpp"

using fiber::detail::tls_session;

namespace {
void exit_as_openssl_is() { std::_Exit(OPENSSL_init_crypto(0, nullptr) == 1 ? 0 : 3); }
}  // namespace

TEST(openssl_exit, a_process_that_used_tls_ends_with_openssl_still_up_for_its_statics) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atexit(exit_as_openssl_is);  // first registered, last run
    auto key = tls_session::key_for("the job's secret");
    tls_session client(tls_session::role::client, key), server(tls_session::role::server, key);
    std::exit(handshake_pair(client, server) ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 4) << "the handshake failed";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "OpenSSL's exit handler ran before the process's own: its globals were freed";
}
