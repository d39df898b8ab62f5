// Two TLS sessions' handshake run against each other in memory, for the tests of the session and
// of what uses one.
#pragma once
#include <string>

#include "transport/tls_session.hpp"

namespace {
/// Runs two sessions' handshake against each other, in memory; whether both ended it.
inline bool handshake_pair(fiber::detail::tls_session& client, fiber::detail::tls_session& server) {
  using step = fiber::detail::tls_session::step;
  for (int round = 0; round < 10; ++round) {
    auto c = client.handshake();
    std::string bytes;
    client.take_output(bytes);
    server.feed(bytes.data(), bytes.size());
    auto s = server.handshake();
    bytes.clear();
    server.take_output(bytes);
    client.feed(bytes.data(), bytes.size());
    if (c == step::failed || s == step::failed) return false;
    if (c == step::done && s == step::done) return true;
  }
  return false;
}
}  // namespace
