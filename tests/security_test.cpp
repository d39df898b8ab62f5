// Who may talk to a master: raw ZeroMQ peers without the job's keys (CURVE, PLAIN), junk and
// strangers on the direct links of local children, and malformed frames on the wire.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "runtime/links/direct_listener.hpp"
#include "runtime/protocol.hpp"
#include "runtime/runtime.hpp"
#include "transport/message_frames.hpp"
#include "support.hpp"

extern char** environ;

namespace {
void add_one(fiber::simple_queue<int> in, fiber::simple_queue<int> out) { out.put(in.get().get() + 1).get(); }

// Starts a child so that the context listens, and checks the job works.
void check_job_works(fiber::context& ctx) {
  fiber::simple_queue<int> in(ctx), out(ctx);
  fiber::process p(ctx, &add_one, in, out);
  p.start().get();
  in.put(41).get();
  EXPECT_EQ(out.get().get(), 42);
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
}

// Connects `peer` to `endpoint`, queues `probe` (if any) for sending, and returns how the
// handshake ended (bounded wait, a guard against hangs only): one of `wanted`, or 0.
int handshake_outcome(zmq::context_t& z, zmq::socket_t& peer, const std::string& endpoint,
                      std::initializer_list<int> wanted, std::string_view probe = {});

// Waits (bounded, as a guard against hangs only) for a monitor event of one of `wanted`.
int wait_for_event(zmq::socket_t& monitor, std::initializer_list<int> wanted) {
  monitor.set(zmq::sockopt::rcvtimeo, 30000);
  for (;;) {
    zmq::message_t event, address;
    if (!monitor.recv(event)) return 0;
    (void)monitor.recv(address);
    std::uint16_t id;
    std::memcpy(&id, event.data(), sizeof id);
    for (int w : wanted)
      if (id == w) return id;
  }
}
int handshake_outcome(zmq::context_t& z, zmq::socket_t& peer, const std::string& endpoint,
                      std::initializer_list<int> wanted, std::string_view probe) {
  static int n = 0;
  auto address = "inproc://handshake-monitor-" + std::to_string(++n);
  zmq_socket_monitor(peer.handle(), address.c_str(), ZMQ_EVENT_ALL);
  zmq::socket_t monitor(z, zmq::socket_type::pair);
  monitor.connect(address);
  peer.connect(endpoint);
  // The probe is queued on the pipe connect() made; on a loaded machine ZeroMQ has once refused it
  // (no pipe to send on by then). Nothing went in then either, and what the callers check (the
  // handshake's outcome, nothing received) holds the same.
  if (!probe.empty()) (void)peer.send(zmq::buffer(probe), zmq::send_flags::dontwait);
  int ev = wait_for_event(monitor, wanted);
  zmq_socket_monitor(peer.handle(), nullptr, 0);
  return ev;
}
}  // namespace
FIBER_REMOTE(add_one);

namespace {
// What a task and what it starts can see of the job's secret: the variable in its own
// environment, and in a shell's it starts.
std::string secret_seen(int) {
  std::string seen;
  if (const char* own = std::getenv("FIBER_WORKER_KEYS")) seen += std::string("own:") + own;
  if (FILE* sh = ::popen("printf %s \"$FIBER_WORKER_KEYS\"", "r")) {
    char buf[512];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, sh)) > 0;) seen.append(buf, n);
    ::pclose(sh);
  }
  return seen;
}
}  // namespace
FIBER_REMOTE(secret_seen);

namespace {
/// Children on this host over ZeroMQ (not the default direct links), as across a network.
fiber::config local_zeromq() { return fiber::config::load({{"local_transport", "zeromq"}}); }
}  // namespace

TEST(security, plain_zeromq_client_gets_nothing_in_or_out) {
  fiber::context ctx(local_zeromq());
  check_job_works(ctx);
  auto endpoints = ctx.endpoints();
  ASSERT_FALSE(endpoints.empty());
  zmq::context_t z;
  for (auto& endpoint : endpoints) {
    zmq::socket_t intruder(z, zmq::socket_type::dealer);
    intruder.set(zmq::sockopt::linger, 0);
    std::string put(24, '\0');  // something that looks like a header
    int ev = handshake_outcome(z, intruder, endpoint,
                               {ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL, ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                                ZMQ_EVENT_HANDSHAKE_SUCCEEDED},
                               put);
    EXPECT_NE(ev, ZMQ_EVENT_HANDSHAKE_SUCCEEDED) << endpoint;
    EXPECT_NE(ev, 0) << "no handshake outcome for " << endpoint;
    zmq::message_t reply;
    EXPECT_FALSE(intruder.recv(reply, zmq::recv_flags::dontwait));
  }
  check_job_works(ctx);
}

TEST(security, local_zeromq_peer_without_the_jobs_secret_is_refused) {
  fiber::context ctx(local_zeromq());  // encryption=auto: a local unix socket checks the job's secret
  check_job_works(ctx);
  auto endpoint = ctx.endpoints().at(0);
  zmq::context_t z;
  zmq::socket_t stranger(z, zmq::socket_type::dealer);
  stranger.set(zmq::sockopt::linger, 0);
  stranger.set(zmq::sockopt::plain_username, "fiber");
  stranger.set(zmq::sockopt::plain_password, "a guess");
  EXPECT_EQ(handshake_outcome(z, stranger, endpoint, {ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, ZMQ_EVENT_HANDSHAKE_SUCCEEDED}),
            ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
  check_job_works(ctx);
}

TEST(security, curve_client_without_the_jobs_key_is_refused) {
  fiber::context ctx(fiber::config::load({{"encryption", "always"}}));
  check_job_works(ctx);
  auto endpoint = ctx.endpoints().at(0);
  zmq::context_t z;
  char pub[41], sec[41];
  ASSERT_EQ(zmq_curve_keypair(pub, sec), 0);
  zmq::socket_t stranger(z, zmq::socket_type::dealer);
  stranger.set(zmq::sockopt::linger, 0);
  stranger.set(zmq::sockopt::curve_serverkey, ctx.runtime()->keys().server_public);  // knows the server...
  stranger.set(zmq::sockopt::curve_publickey, pub);                                   // ...but not the job's key
  stranger.set(zmq::sockopt::curve_secretkey, sec);
  EXPECT_EQ(handshake_outcome(z, stranger, endpoint, {ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, ZMQ_EVENT_HANDSHAKE_SUCCEEDED}),
            ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
  check_job_works(ctx);
}

// ZeroMQ applies its size limit to every frame, the handshake's commands included: a stranger
// that announces a frame larger than fiber ever sends is cut off at once, before it has proven
// anything, instead of being read into the master's memory (a 1 GiB frame used to be accepted).
TEST(security, a_stranger_announcing_a_huge_frame_before_authenticating_is_cut_off) {
  fiber::context ctx(local_zeromq());
  check_job_works(ctx);
  auto endpoint = ctx.endpoints().at(0);
  ASSERT_TRUE(endpoint.starts_with("ipc://@")) << endpoint;
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  auto name = endpoint.substr(7);
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())), 0);
  // A ZMTP 3.0 greeting (PLAIN, as client), then a command frame announcing 1 GiB.
  std::string greeting(64, '\0');
  greeting[0] = '\xff';
  greeting[9] = '\x7f';
  greeting[10] = 3;
  std::memcpy(greeting.data() + 12, "PLAIN", 5);
  std::string frame = {'\x06', 0, 0, 0, 0, '\x40', 0, 0, 0};  // command, long size: 2^30, big-endian
  ASSERT_EQ(::send(fd, greeting.data(), greeting.size(), MSG_NOSIGNAL), 64);
  ASSERT_EQ(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL), 9);
  // Then the gigabyte itself: before the frame limit the master read all of it into memory.
  // Now the connection ends at once and the sends fail (a send timeout guards against a hang).
  timeval guard{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &guard, sizeof guard);
  std::string body(64 << 10, 'x');
  std::size_t sent = 0;
  bool closed = false;
  while (sent < (std::size_t{1} << 30)) {
    auto w = ::send(fd, body.data(), body.size(), MSG_NOSIGNAL);
    if (w < 0) {
      closed = errno == EPIPE || errno == ECONNRESET;
      break;
    }
    sent += static_cast<std::size_t>(w);
  }
  ::close(fd);
  EXPECT_LT(sent, std::size_t{64} << 20) << "the master took " << sent << " bytes from a stranger";
  EXPECT_TRUE(closed) << "the connection was not ended: " << std::strerror(errno);
  check_job_works(ctx);
}

namespace {
// Connects with the job's own credentials, as a worker would.
zmq::socket_t keyed_peer(zmq::context_t& z, fiber::context& ctx) {
  zmq::socket_t peer(z, zmq::socket_type::dealer);
  peer.set(zmq::sockopt::linger, 0);
  peer.set(zmq::sockopt::rcvtimeo, 30000);  // guard against a hang only
  auto keys = fiber::detail::job_keys::from_worker_text(ctx.runtime()->master().links().worker_credentials());
  fiber::detail::secure_as_client(peer, keys);
  peer.connect(ctx.endpoints().at(0));
  return peer;
}

/// A packed frame, as a zmq_channel sends a small message of several parts: magic, a reserved
/// word, the part count, each part's size, then the parts. `skew` is added to the first size and,
/// when `balanced`, taken from the second (the sizes then add up, modulo 2^64, to the bytes there).
std::string packed(const std::vector<std::string>& parts, std::uint64_t skew = 0, bool balanced = false) {
  std::string f("\xf1" "BSPACK\x01", 8);
  f.append(8, '\0');
  std::uint64_t count = parts.size();
  f.append(reinterpret_cast<const char*>(&count), 8);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::uint64_t size = parts[i].size() + (i == 0 ? skew : 0) - (i == 1 && balanced ? skew : 0);
    f.append(reinterpret_cast<const char*>(&size), 8);
  }
  for (auto& p : parts) f += p;
  return f;
}

/// The parts of the next message the master sends a raw peer: it packs small ones into a frame.
std::vector<std::string> receive_parts(zmq::socket_t& peer) {
  std::vector<std::string> frames;
  for (bool more = true; more;) {
    zmq::message_t m;
    if (!peer.recv(m)) return {};
    frames.push_back(m.to_string());
    more = m.more();
  }
  if (frames.size() != 1 || frames[0].size() < 24 || frames[0].compare(0, 8, std::string("\xf1" "BSPACK\x01", 8)) != 0)
    return frames;
  auto word = [&](std::size_t at) {
    std::uint64_t w;
    std::memcpy(&w, frames[0].data() + at, 8);
    return w;
  };
  std::vector<std::string> parts;
  std::size_t at = 24 + word(16) * 8;
  for (std::uint64_t k = 0; k < word(16); ++k) {
    parts.push_back(frames[0].substr(at, word(24 + k * 8)));
    at += parts.back().size();
  }
  return parts;
}

void malformed_frames_are_reported_not_fatal(fiber::context& ctx) {
  check_job_works(ctx);
  zmq::context_t z;
  auto peer = keyed_peer(z, ctx);

  // 1. garbage instead of a header
  ASSERT_TRUE(peer.send(zmq::str_buffer("garbage"), zmq::send_flags::none));
  auto reply = receive_parts(peer);
  ASSERT_EQ(reply.size(), 2u);
  auto h = fiber::detail::parse_header(zmq::message_t(reply[0]));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->type, fiber::detail::kind::failure);
  EXPECT_NE(reply[1].find("malformed"), std::string::npos);

  // 2. a header of another protocol version
  fiber::detail::header future{fiber::detail::kind::put, 0, 99, 0, 1, 0};
  ASSERT_TRUE(peer.send(zmq::buffer(&future, sizeof future), zmq::send_flags::none));
  reply = receive_parts(peer);
  ASSERT_EQ(reply.size(), 2u);
  EXPECT_EQ(fiber::detail::parse_header(zmq::message_t(reply[0]))->type, fiber::detail::kind::failure);

  // 3. a put of a large string in pieces behind a layout frame (as every fiber sender splits
  // parts over max_frame_bytes) arrives joined; pieces that do not match their layout are
  // dropped, and the channel goes on
  fiber::simple_queue<std::string> strings(ctx);
  std::string large(3 * fiber::detail::max_frame_bytes + 17, 'x');
  for (std::size_t i = 0; i < large.size(); i += 997) large[i] = static_cast<char>('a' + i % 26);
  auto send_in_pieces = [&](const std::string& value, bool mismatched) {
    fiber::writer lw;
    lw.value(value);
    fiber::detail::multipart parts;
    parts.push_back(fiber::detail::make_header(fiber::detail::kind::put, strings.id()));
    for (auto& f : fiber::detail::to_frames(lw)) parts.push_back(std::move(f));
    std::string layout("\xf1" "BSPLIT\x01", 8);
    layout.append(8, '\0');
    std::uint64_t count = parts.size();
    layout.append(reinterpret_cast<const char*>(&count), 8);
    for (auto& part : parts) {
      std::uint64_t size = part.size() + (mismatched ? 1 : 0);
      layout.append(reinterpret_cast<const char*>(&size), 8);
    }
    ASSERT_TRUE(peer.send(zmq::buffer(layout), zmq::send_flags::sndmore));
    for (std::size_t k = 0; k < parts.size(); ++k) {
      auto* data = static_cast<const char*>(parts[k].data());
      for (std::size_t at = 0; at < parts[k].size() || at == 0; at += fiber::detail::max_frame_bytes) {
        auto piece = std::min(fiber::detail::max_frame_bytes, parts[k].size() - at);
        bool last = k + 1 == parts.size() && at + piece >= parts[k].size();
        ASSERT_TRUE(peer.send(zmq::buffer(data + at, piece), last ? zmq::send_flags::none : zmq::send_flags::sndmore));
        if (piece == 0) break;
      }
    }
  };
  send_in_pieces("dropped", true);
  send_in_pieces(large, false);
  EXPECT_EQ(strings.get().get(), large);

  // 4. a well-formed put still reaches a queue, and the job keeps working
  fiber::simple_queue<int> q(ctx);
  fiber::writer w;
  w.value(1234);
  auto put = fiber::detail::make_header(fiber::detail::kind::put, q.id());
  auto put_text = put.to_string();  // a send empties the message
  ASSERT_TRUE(peer.send(put, zmq::send_flags::sndmore));
  ASSERT_TRUE(peer.send(zmq::buffer(w.head()), zmq::send_flags::none));
  EXPECT_EQ(q.get().get(), 1234);

  // 5. a packed frame whose sizes do not add up is dropped; a well-formed one arrives unpacked
  std::string head(reinterpret_cast<const char*>(w.head().data()), w.head().size());
  ASSERT_TRUE(peer.send(zmq::buffer(packed({put_text, head}, 5)), zmq::send_flags::none));
  // ... and one whose sizes wrap around to the right total: the first past the bytes, the second
  // "negative"
  ASSERT_TRUE(peer.send(zmq::buffer(packed({put_text, head}, head.size() + 1, true)), zmq::send_flags::none));
  fiber::writer w2;
  w2.value(5678);
  ASSERT_TRUE(peer.send(zmq::buffer(packed({put_text, std::string(reinterpret_cast<const char*>(w2.head().data()), w2.head().size())})),
                        zmq::send_flags::none));
  EXPECT_EQ(q.get().get(), 5678);
  check_job_works(ctx);
}
}  // namespace

TEST(security, malformed_frames_from_an_authenticated_peer_are_reported_not_fatal) {
  fiber::context ctx(local_zeromq());
  malformed_frames_are_reported_not_fatal(ctx);
}

TEST(security, malformed_frames_over_curve_are_reported_not_fatal) {
  fiber::context ctx(fiber::config::load({{"encryption", "always"}}));
  malformed_frames_are_reported_not_fatal(ctx);
}

TEST(security, curve_workers_run_when_encryption_is_always) {
  fiber::context ctx(fiber::config::load({{"encryption", "always"}}));
  check_job_works(ctx);
  EXPECT_FALSE(fiber::detail::job_keys::from_worker_text(ctx.runtime()->master().links().worker_credentials()).plain);
}

namespace {
int connect_abstract(const std::string& name) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), std::min(name.size(), sizeof addr.sun_path - 2));
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}
/// A direct link's frame head: part count, then each part's size.
std::string frame(std::initializer_list<std::uint64_t> sizes) {
  auto parts = static_cast<std::uint32_t>(sizes.size());
  std::string h(reinterpret_cast<const char*>(&parts), sizeof parts);
  for (auto s : sizes) h.append(reinterpret_cast<const char*>(&s), sizeof s);
  return h;
}
/// A whole message of `parts`.
std::string message(std::initializer_list<std::string> parts) {
  std::string head, body;
  auto n = static_cast<std::uint32_t>(parts.size());
  head.append(reinterpret_cast<const char*>(&n), sizeof n);
  for (auto& p : parts) {
    std::uint64_t size = p.size();
    head.append(reinterpret_cast<const char*>(&size), sizeof size);
    body += p;
  }
  return head + body;
}
}  // namespace

// Any process of this user can connect to the master's abstract unix socket. Junk (part sizes
// that wrap past 2^64 crashed an earlier link), a huge announced message, a greeting with a wrong
// secret or for a child the master does not wait for, noise and silence: the master closes each
// connection, holds none, and the job goes on.
TEST(security, junk_and_strangers_on_the_direct_links_neither_crash_the_master_nor_stay_connected) {
  FIBER_TEST_LOCAL_ONLY("direct links exist on the local backend");
  // Silence is closed after start_timeout_ms; children greet at once, long before that.
  fiber::context ctx(fiber::config::load({{"start_timeout_ms", "3000"}}));
  check_job_works(ctx);
  auto endpoint = ctx.endpoints().at(0);
  ASSERT_TRUE(endpoint.starts_with("unix:@")) << endpoint;
  auto name = endpoint.substr(6);
  auto password = ctx.runtime()->keys().password;
  const std::uint64_t wraps = (std::uint64_t{1} << 63) + 14;
  std::vector<int> peers;
  for (const std::string& junk :
       {frame({wraps, wraps}) + std::string(28, 'x'),                        // sizes that wrap
        frame({std::uint64_t{2} << 30}) + std::string(1 << 20, 'y'),        // 2 GiB announced
        message({"fiber direct link 1", "1", "a guess"}),                   // wrong secret
        message({"fiber direct link 1", "no such child", password}),        // the secret, but no child of ours
        message({"something else", "1", password}),                         // not a greeting
        std::string(64, '\xff'), std::string()}) {                          // noise, silence
    int fd = connect_abstract(name);
    ASSERT_GE(fd, 0) << "cannot connect to " << name;
    if (!junk.empty()) (void)!::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    peers.push_back(fd);
  }
  check_job_works(ctx);  // the master lives and its children's links work
  for (int fd : peers) {  // every junk connection was closed by the master
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 30'000), 1) << "a junk connection is still held open by the master";
    char buf[256];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
    }
    EXPECT_TRUE(n == 0 || errno == ECONNRESET) << "expected the master to have closed the connection";
    ::close(fd);
  }
  check_job_works(ctx);
}

// A task runs the user's code, which may start tools or shells: none of them inherits the job's
// keys, which the worker read once at its start. The pool still works: the keys are in memory.
TEST(security, a_worker_reads_its_keys_once_and_nothing_it_starts_inherits_them) {
  fiber::pool p(2);
  for (auto& seen : p.map(&secret_seen, std::vector<int>{1, 2, 3, 4}).get())
    EXPECT_TRUE(seen.empty()) << "a task saw the job's keys (" << seen.size() << " bytes, not shown here)";
}

TEST(security, local_children_use_direct_links_unless_zeromq_is_asked_for) {
  FIBER_TEST_LOCAL_ONLY("direct links exist on the local backend");
  fiber::context direct, zeromq(local_zeromq()), curve(fiber::config::load({{"encryption", "always"}}));
  for (auto* ctx : {&direct, &zeromq, &curve}) check_job_works(*ctx);
  EXPECT_TRUE(direct.endpoints().at(0).starts_with("unix:@"));
  EXPECT_TRUE(zeromq.endpoints().at(0).starts_with("ipc://"));
  EXPECT_TRUE(curve.endpoints().at(0).starts_with("ipc://"));  // encryption=always: CURVE over ZeroMQ
}

namespace {
int square_it(int x) { return x * x; }
void nothing_to_do() {}
}  // namespace
FIBER_REMOTE(square_it);
FIBER_REMOTE(nothing_to_do);

namespace {
/// Room in this process (the master and the flood) for `wanted` connections and the master's:
/// how many the flood may make, at most `wanted` (root may raise the hard limit too).
std::size_t room_for_a_flood(std::size_t wanted) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return 0;
  rlim_t need = 2 * wanted + 256;
  if (files.rlim_cur < need) {
    rlimit more{need, std::max<rlim_t>(files.rlim_max, need)};
    if (::setrlimit(RLIMIT_NOFILE, &more) != 0) more = {files.rlim_max, files.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &more) != 0) return 0;
    files = more;
  }
  return std::min<std::size_t>(wanted, (static_cast<std::size_t>(files.rlim_cur) - 256) / 2);
}

/// `count` connections to the abstract unix socket `name` that never say a word; when the
/// master's backlog is full, `p` runs a task so that its loop takes some.
std::vector<int> flood(const std::string& name, std::size_t count, fiber::pool& p) {
  sockaddr_un ua{};
  ua.sun_family = AF_UNIX;
  std::memcpy(ua.sun_path + 1, name.data(), name.size());
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  std::vector<int> strangers;
  while (strangers.size() < count) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    if (fd < 0) break;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&ua), len) == 0) {
      strangers.push_back(fd);
      continue;
    }
    ::close(fd);
    EXPECT_EQ(errno, EAGAIN) << std::strerror(errno);
    if (errno != EAGAIN) break;
    (void)p.apply(&square_it, 3).get();
  }
  return strangers;
}

/// A map runs while `name` is flooded: it finishes with every result, and a new worker links
/// while the flood's connections still wait. Returns the flood's sockets.
std::vector<int> map_and_link_through_a_flood(fiber::context& ctx, const std::string& name, std::size_t count) {
  fiber::pool p(ctx, 2);
  p.ready().get();
  std::vector<int> xs(2000);
  for (int i = 0; i < 2000; ++i) xs[i] = i;
  auto running = p.map_async(&square_it, xs, 1);
  auto strangers = flood(name, count, p);
  auto squares = std::move(running).get();
  for (int i = 0; i < 2000; ++i) EXPECT_EQ(squares[i], i * i);
  fiber::process late(ctx, &nothing_to_do);
  late.start().get();
  late.join().get();
  EXPECT_EQ(late.exitcode(), 0);
  return strangers;
}
}  // namespace

// 5,000 connections to the master's socket from this host, none of which ever proves itself,
// made while a map runs: the map finishes with every result, the master closes what it will not
// hold (it holds at most a quarter of its descriptors, up to 1024, each for seconds), and a new
// worker links while the flood's connections still wait.
TEST(security, a_flood_of_connections_leaves_a_running_map_finishing_and_new_workers_linking) {
  FIBER_TEST_LOCAL_ONLY("floods the master's unix socket, on this host");
  auto count = room_for_a_flood(5000);
  ASSERT_GT(count, fiber::detail::direct_listener::max_unproven()) << "no room for a flood in the descriptor limit";
  fiber::context ctx;
  check_job_works(ctx);
  auto endpoint = ctx.endpoints().at(0);
  ASSERT_TRUE(endpoint.starts_with("unix:@")) << endpoint;
  auto strangers = map_and_link_through_a_flood(ctx, endpoint.substr(6), count);
  // The master held no more than it may: the rest were closed (reading them ends at once).
  std::size_t closed = 0;
  for (int fd : strangers) {
    char byte;
    auto r = ::recv(fd, &byte, 1, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) ++closed;
  }
  EXPECT_GE(closed, count - fiber::detail::direct_listener::max_unproven());
  for (int fd : strangers) ::close(fd);
  check_job_works(ctx);
}

// The same flood at a master on ZeroMQ (local_transport=zeromq): ZeroMQ has no cap of its own on
// a socket's connections, so the descriptor limit bounds them and each waits at most the 10 s of
// the handshake limit; the map finishes and a new worker links all the same.
TEST(security, a_flood_of_connections_to_a_zeromq_master_leaves_a_running_map_finishing_and_new_workers_linking) {
  FIBER_TEST_LOCAL_ONLY("floods the master's unix socket, on this host");
  auto count = room_for_a_flood(5000);
  ASSERT_GT(count, 0u);
  fiber::context ctx(local_zeromq());
  check_job_works(ctx);
  auto endpoint = ctx.endpoints().at(0);
  ASSERT_TRUE(endpoint.starts_with("ipc://@")) << endpoint;
  auto strangers = map_and_link_through_a_flood(ctx, endpoint.substr(7), count);
  for (int fd : strangers) ::close(fd);
  check_job_works(ctx);
}

// A process that holds the job's keys (here: a child's own program, which reads them as every
// child may) links with the id of a sibling that has not linked yet: without the one-time word
// its master gave that sibling, it is refused before it gets the sibling's function and
// arguments, and the sibling's start fails saying so.
TEST(security, a_process_with_the_jobs_keys_cannot_take_a_siblings_place) {
  FIBER_TEST_LOCAL_ONLY("the sibling tells this test its id and keys through a FIFO of this host");
  namespace fs = std::filesystem;
  auto dir = fiber_test::run_folder() / ("impostor_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto fifo = dir / "told";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The child that never links: it tells what it was given, and waits to be killed.
  auto script = dir / "tells_and_waits";
  std::ofstream(script) << "#!/bin/sh\n{ echo \"$FIBER_WORKER_TOKEN\"; echo \"$FIBER_WORKER_ENDPOINT\"; "
                           "echo \"$FIBER_WORKER_JOB\"; cat \"$FIBER_WORKER_KEYS_FILE\"; echo; } > "
                        << fifo.string() << "\nexec sleep 600\n";
  fs::permissions(script, fs::perms::owner_all);
  fiber::context ctx(fiber::config::load({{"executable", script.string()}}));
  fiber::process sibling(ctx, &nothing_to_do);
  sibling.set_daemon(true);  // its program never ends by itself: it goes with the context
  auto started = std::async(std::launch::async, [&] { sibling.start().get(); });
  std::ifstream told(fifo);  // blocks until the sibling writes
  std::string token, endpoint, job, keys;
  std::getline(told, token);
  std::getline(told, endpoint);
  std::getline(told, job);
  std::getline(told, keys);
  ASSERT_FALSE(keys.empty());
  auto keys_file = dir / "keys";
  std::ofstream(keys_file) << keys;
  // The impostor: this program as a worker, with the sibling's id and the job's keys.
  std::vector<std::string> env_text{"FIBER_WORKER_TOKEN=" + token, "FIBER_WORKER_ENDPOINT=" + endpoint,
                                    "FIBER_WORKER_JOB=" + job, "FIBER_WORKER_KEYS_FILE=" + keys_file.string(),
                                    "FIBER_WORKER_NAME=Impostor"};
  for (char** e = environ; *e; ++e)
    if (!std::string_view(*e).starts_with("FIBER_")) env_text.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  auto self = fs::read_symlink("/proc/self/exe").string();
  char* argv[] = {self.data(), nullptr};
  pid_t impostor = 0;
  ASSERT_EQ(::posix_spawn(&impostor, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(impostor, &status, 0), impostor);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 3) << "the impostor was not refused";  // exit_refused
  fiber_test::expect_error([&] { started.get(); }, fiber::errc::protocol_error, "one-time word");
  fs::remove_all(dir);
}
