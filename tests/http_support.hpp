// One HTTP request run to its end on an io_context of its own, for tests that talk to a server
// of fiber's (transport/http_client).
#pragma once
#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include "transport/http_client.hpp"

namespace fiber_test {

/// The answer to `req`; a transport error fails the test.
inline fiber::detail::http_response http_call(fiber::detail::http_request req) {
  asio::io_context io;
  fiber::detail::http_client http(io);
  fiber::detail::http_response out;
  http.start(std::move(req), [&](std::error_code ec, fiber::detail::http_response r) {
    EXPECT_FALSE(ec) << ec.message();
    out = std::move(r);
  });
  io.run();
  return out;
}

}  // namespace fiber_test
