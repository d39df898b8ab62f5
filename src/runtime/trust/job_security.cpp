#include "runtime/trust/job_security.hpp"

#include <cstring>
#include <vector>

#include "core/log.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

job_keys job_keys::generate() {
  job_keys k;
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    throw error(errc::protocol_error, "libzmq was built without CURVE support; install a libzmq with libsodium");
  k.server_public = pub;
  k.server_secret = sec;
  zmq_curve_keypair(pub, sec);
  k.client_public = pub;
  k.client_secret = sec;
  zmq_curve_keypair(pub, sec);  // 40 random Z85 characters
  k.password = sec;
  return k;
}

std::string job_keys::for_worker(bool use_plain) const {
  if (use_plain) return "plain," + password;
  return "curve," + server_public + "," + client_public + "," + client_secret;
}

job_keys job_keys::from_worker_text(std::string_view text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    auto comma = text.find(',', start);
    parts.emplace_back(text.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  job_keys k;
  if (parts.size() == 2 && parts[0] == "plain" && parts[1].size() == 40) {
    k.plain = true;
    k.password = parts[1];
    return k;
  }
  if (parts.size() == 4 && parts[0] == "curve" && parts[1].size() == 40 && parts[2].size() == 40 && parts[3].size() == 40) {
    k.server_public = parts[1];
    k.client_public = parts[2];
    k.client_secret = parts[3];
    return k;
  }
  throw error(errc::protocol_error, "malformed worker credentials; only fiber starts workers");
}

void secure_as_server(zmq::socket_t& s, const job_keys& keys, bool plain) {
  if (plain) {
    s.set(zmq::sockopt::plain_server, 1);
  } else {
    s.set(zmq::sockopt::curve_server, 1);
    s.set(zmq::sockopt::curve_secretkey, keys.server_secret);
  }
  s.set(zmq::sockopt::zap_domain, "fiber");
}

void secure_as_client(zmq::socket_t& s, const job_keys& keys) {
  if (keys.plain) {
    s.set(zmq::sockopt::plain_username, "fiber");
    s.set(zmq::sockopt::plain_password, keys.password);
  } else {
    s.set(zmq::sockopt::curve_serverkey, keys.server_public);
    s.set(zmq::sockopt::curve_publickey, keys.client_public);
    s.set(zmq::sockopt::curve_secretkey, keys.client_secret);
  }
}

zap_handler::zap_handler(asio::io_context& io, zmq::context_t& ctx, const job_keys& keys, bool plain)
    : keys_(keys), plain_(plain) {
  zmq::socket_t s(ctx, zmq::socket_type::rep);
  s.set(zmq::sockopt::linger, 0);
  s.bind("inproc://zeromq.zap.01");
  socket_ = std::make_shared<zmq_channel>(io, std::move(s));
  socket_->keep_frames();  // the peer is libzmq's ZAP client, which reads the reply frame by frame
}

void zap_handler::start() { step(); }

void zap_handler::close() {
  if (socket_) socket_->close();
}

bool zap_handler::allowed(const multipart& req) const {
  // version, request id, domain, address, identity, mechanism, credentials...
  auto mechanism = req.size() >= 7 ? req[5].to_string_view() : std::string_view();
  if (mechanism == "CURVE" && !plain_ && req[6].size() == 32) {
    std::uint8_t expected[32];
    zmq_z85_decode(expected, keys_.client_public.c_str());
    return std::memcmp(expected, req[6].data(), 32) == 0;
  }
  if (mechanism == "PLAIN" && plain_ && req.size() >= 8) return req[7].to_string_view() == keys_.password;
  return false;
}

void zap_handler::step() {
  socket_->async_receive([weak = weak_from_this()](std::error_code ec, multipart req) {
    auto self = weak.lock();
    if (ec || !self) return;
    bool ok = self->allowed(req);
    if (!ok) logf(log_level::warn, "refused a peer without this job's keys");
    multipart reply;
    reply.emplace_back(std::string_view("1.0"));
    reply.push_back(req.size() > 1 ? std::move(req[1]) : zmq::message_t());
    reply.emplace_back(std::string_view(ok ? "200" : "400"));
    reply.emplace_back(std::string_view(ok ? "OK" : "unknown key"));
    reply.emplace_back();
    reply.emplace_back();
    (void)self->socket_->send(std::move(reply));
    self->step();
  });
}

}  // namespace fiber::detail
