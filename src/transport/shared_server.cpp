#include "transport/shared_server.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include "core/log.hpp"
#include "fiber/detail/shared_entry.hpp"
#include "fiber/error.hpp"
#include "transport/reachable_address.hpp"
#include "transport/shared_frames.hpp"

namespace fiber::detail {
namespace {

using key_pair = curve_pair;
key_pair new_key_pair() {
  char pub[41] = {}, sec[41] = {};
  if (zmq_curve_keypair(pub, sec) != 0) throw error(errc::spawn_failed, "cannot make a CURVE key pair (libzmq without CURVE)");
  return {pub, sec};
}

class server {
 public:
  explicit server(std::string admitted)
      : ctx_(1), router_(ctx_, zmq::socket_type::router), zap_(ctx_, zmq::socket_type::rep), admitted_(std::move(admitted)) {
    auto keys = new_key_pair();
    // The handler first: a connection that comes before it would not be asked about.
    zap_.bind("inproc://zeromq.zap.01");
    if (admitted_.size() != 40 || !zmq_z85_decode(admitted_key_, admitted_.c_str()))
      throw error(errc::protocol_error, "a shared object server needs the job's client key (40 Z85 characters)");
    router_.set(zmq::sockopt::curve_server, 1);
    router_.set(zmq::sockopt::curve_secretkey, keys.secret_key);
    router_.set(zmq::sockopt::zap_domain, "fiber-shared");
    // A request is an id: 1 KiB leaves room for the CURVE handshake's own commands (about 300 bytes).
    router_.set(zmq::sockopt::maxmsgsize, std::int64_t{1024});
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://" + reachable_address() + ":0");
    address_ = {router_.get(zmq::sockopt::last_endpoint), keys.public_key};
    // Serves until the process ends: the thread and its context are never torn down (a worker
    // exits with its objects).
    std::thread([this] { run(); }).detach();
  }
  const shared_server_address& address() const { return address_; }
  const std::string& admitted() const { return admitted_; }

 private:
  void run() {
    for (;;) {
      try {
        zmq::pollitem_t items[] = {{zap_.handle(), 0, ZMQ_POLLIN, 0}, {router_.handle(), 0, ZMQ_POLLIN, 0}};
        zmq::poll(items, 2, std::chrono::milliseconds(-1));
        if (items[0].revents & ZMQ_POLLIN) authenticate();
        if (!(items[1].revents & ZMQ_POLLIN)) continue;
        multipart request;
        do {
          zmq::message_t part;
          (void)router_.recv(part, zmq::recv_flags::none);
          request.push_back(std::move(part));
        } while (router_.get(zmq::sockopt::rcvmore));
        answer(request);
      } catch (const std::exception& e) {
        logf(log_level::warn, "shared object server: ", e.what());
      }
    }
  }
  /// One ZAP request: 200 for the job's client key over CURVE, 400 for anything else.
  void authenticate() {
    multipart req;
    do {
      zmq::message_t part;
      (void)zap_.recv(part, zmq::recv_flags::none);
      req.push_back(std::move(part));
    } while (zap_.get(zmq::sockopt::rcvmore));
    // version, request id, domain, address, identity, mechanism, client key
    bool ok = req.size() >= 7 && req[5].to_string_view() == "CURVE" && req[6].size() == 32 &&
              std::memcmp(req[6].data(), admitted_key_, 32) == 0;
    if (!ok) logf(log_level::warn, "shared object server: refused a peer without this job's key");
    const char* reply[] = {"1.0", nullptr, ok ? "200" : "400", ok ? "OK" : "not of this job", "", ""};
    for (int i = 0; i < 6; ++i) {
      zmq::message_t part = i == 1 ? (req.size() > 1 ? std::move(req[1]) : zmq::message_t())
                                   : zmq::message_t(reply[i], std::strlen(reply[i]));
      zap_.send(part, i < 5 ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  void answer(multipart& request) {
    if (request.size() != 2 || request[1].size() != sizeof(std::uint64_t)) return;  // not a fetch
    std::uint64_t id;
    std::memcpy(&id, request[1].data(), sizeof id);
    multipart reply;
    reply.push_back(std::move(request[0]));  // the asker's routing id
    if (auto e = find_shared(id))
      append_shared_frames(reply, *e);
    else
      reply.emplace_back();  // let go of: nothing
    for (std::size_t i = 0; i < reply.size(); ++i)
      router_.send(reply[i], i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }

  zmq::context_t ctx_;
  zmq::socket_t router_, zap_;
  std::string admitted_;
  std::uint8_t admitted_key_[32] = {};
  shared_server_address address_;
};

}  // namespace

const shared_server_address& serve_shared_objects(const std::string& admitted) {
  static server* s = new server(admitted);  // never destroyed: see server::server
  if (s->admitted() != admitted)
    throw error(errc::protocol_error, "this process's shared object server admits another job's key");
  return s->address();
}

multipart fetch_shared(const shared_server_address& from, std::uint64_t id, std::chrono::milliseconds patience,
                       const curve_pair& client) {
  static zmq::context_t* ctx = new zmq::context_t(1);  // for fetches, kept for the process's life
  static std::atomic<std::uint64_t> next_watch{0};
  zmq::socket_t s(*ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::curve_serverkey, from.public_key);
  s.set(zmq::sockopt::curve_publickey, client.public_key);
  s.set(zmq::sockopt::curve_secretkey, client.secret_key);
  s.set(zmq::sockopt::linger, 0);
  // The connection is watched: ZeroMQ retries in silence a port nobody listens on any more (the
  // worker that served the object ended), a link that broke mid-answer, and a handshake the
  // server refused, and the fetch would wait all of `patience` for them. Watched before it
  // connects, or the first refusal could come before anyone listens for it.
  auto watch_address = "inproc://fiber-fetch-watch-" + std::to_string(next_watch++);
  if (zmq_socket_monitor(s.handle(), watch_address.c_str(),
                         ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
    throw zmq::error_t();
  zmq::socket_t watch(*ctx, zmq::socket_type::pair);
  watch.connect(watch_address);
  // Stopped before `watch` closes: ZeroMQ's I/O thread sends each event with a blocking send, and
  // one sent to a watch nobody holds would block that thread, and every fetch after, for ever.
  struct stop_watching {
    zmq::socket_t& s;
    ~stop_watching() { zmq_socket_monitor(s.handle(), nullptr, 0); }
  } stop{s};
  s.connect(from.endpoint);
  zmq::message_t ask(&id, sizeof id);
  s.send(ask, zmq::send_flags::none);
  auto what = "shared object " + std::to_string(id) + " from the worker at " + from.endpoint;
  auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}, {watch.handle(), 0, ZMQ_POLLIN, 0}};
    if (left.count() <= 0 || zmq::poll(items, 2, left) == 0)
      throw error(errc::timeout, "no answer for " + what + " within " + std::to_string(patience.count()) + " ms");
    if (items[0].revents & ZMQ_POLLIN) break;  // the answer first: a link that broke after it does not matter
    zmq::message_t event, endpoint;
    if (!watch.recv(event) || !watch.recv(endpoint) || event.size() < sizeof(std::uint16_t)) continue;
    std::uint16_t kind = 0;
    std::memcpy(&kind, event.data(), sizeof kind);
    throw error(errc::worker_lost, "cannot fetch " + what + ": " +
                                       (kind == ZMQ_EVENT_CONNECT_RETRIED ? "nothing listens there any more (the worker ended)"
                                        : kind == ZMQ_EVENT_DISCONNECTED  ? "the link broke before the answer came"
                                                                          : "the server refused the handshake"));
  }
  multipart reply;
  do {
    zmq::message_t part;
    (void)s.recv(part, zmq::recv_flags::none);
    reply.push_back(std::move(part));
  } while (s.get(zmq::sockopt::rcvmore));
  if (reply.empty() || (reply.size() == 1 && reply[0].empty()))
    throw error(errc::malformed_message, "the worker at " + from.endpoint + " no longer has shared object " + std::to_string(id));
  return reply;
}

}  // namespace fiber::detail
