// fiber::shared<T> in one process: its codec whole and by reference, its type check, the bound of
// the objects sent apart, and the two ways an object reaches another process apart from the
// messages that refer to it (its frames, or this host's shared memory). Across processes on
// every backend: pool_shared_test.
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <fiber/shared.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <numeric>
#include <string>
#include <vector>

#include "support.hpp"
#include "transport/shared_frames.hpp"
#include "transport/shared_server.hpp"

namespace {

struct model {
  std::vector<double> weights;
  std::string name;
  std::vector<std::string> layers;
};

struct task {
  fiber::shared<model> m;
  int seed = 0;
};

model big_model() {
  model m{std::vector<double>(100000), "mlp", {"in", "hidden", "out"}};  // 800 KB of weights
  std::iota(m.weights.begin(), m.weights.end(), 0.0);
  return m;
}

std::vector<std::span<const std::byte>> spans_of(const fiber::writer& w) {
  std::vector<std::span<const std::byte>> out;
  for (auto& b : w.blobs()) out.emplace_back(b.data, b.size);
  return out;
}

}  // namespace

TEST(shared, a_handle_carries_its_object_whole_where_nothing_sends_it_apart) {
  auto m = fiber::share(big_model());
  fiber::writer w;
  w.value(std::vector<task>{{m, 1}, {m, 2}});
  EXPECT_TRUE(w.shared_attached().empty());
  auto spans = spans_of(w);
  fiber::reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, spans);
  auto back = r.value<std::vector<task>>();
  ASSERT_TRUE(r.at_end());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].m->weights, m->weights);
  EXPECT_EQ(back[1].m->layers, m->layers);
  EXPECT_EQ(back[1].seed, 2);
  // Received whole, it is a copy that outlives the message it came in.
  EXPECT_NE(back[0].m.get().get(), m.get().get());
  EXPECT_EQ(back[0].m.bytes(), m.bytes());
}

TEST(shared, sent_apart_each_item_carries_an_id_and_the_writer_attaches_the_object_once) {
  auto m = fiber::share(big_model());
  auto other = fiber::share(std::vector<int>{1, 2, 3});
  fiber::writer w;
  w.send_shared_apart();
  for (int i = 0; i < 100; ++i) w.value(task{m, i});
  w.value(other);
  ASSERT_EQ(w.shared_attached().size(), 2u);
  EXPECT_EQ(w.shared_attached()[0], m.entry());
  EXPECT_EQ(w.shared_attached()[1], other.entry());
  EXPECT_TRUE(w.blobs().empty());
  EXPECT_LT(w.total_size(), 100 * 40u) << "an id per item, not 800 KB";
  // Read where the object is known by its id (here, the process that shared it): the same object.
  fiber::reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, {});
  for (int i = 0; i < 100; ++i) {
    auto t = r.value<task>();
    EXPECT_EQ(t.m.get().get(), m.get().get());
    EXPECT_EQ(t.seed, i);
  }
  EXPECT_EQ(*r.value<fiber::shared<std::vector<int>>>(), (std::vector<int>{1, 2, 3}));
}

TEST(shared, read_as_another_type_it_fails_naming_both_sides) {
  auto v = fiber::share(std::vector<double>{1.0, 2.0});
  for (bool apart : {false, true}) {
    fiber::writer w;
    if (apart) w.send_shared_apart();
    w.value(v);
    fiber::reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, spans_of(w));
    fiber_test::expect_error([&] { (void)r.value<fiber::shared<std::vector<float>>>(); }, fiber::errc::malformed_message,
                             {"fiber::shared<std::vector<float", "shared with another type"});
  }
}

TEST(shared, an_id_nobody_sent_is_a_clear_error_and_an_empty_handle_says_it_is_empty) {
  fiber::writer w;
  w.pod(std::uint8_t{1});  // by reference
  w.pod(std::uint64_t{12345});
  w.pod(fiber::detail::type_fingerprint(typeid(std::vector<int>)));
  fiber::reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, {});
  fiber_test::expect_error([&] { (void)r.value<fiber::shared<std::vector<int>>>(); }, fiber::errc::malformed_message,
                           "never sent to this process");

  fiber::shared<std::vector<int>> empty;
  EXPECT_FALSE(empty);
  fiber_test::expect_error([&] { (void)empty->size(); }, fiber::errc::closed, "empty");
  fiber::writer e;
  e.value(empty);
  fiber::reader er({reinterpret_cast<const std::byte*>(e.head().data()), e.head().size()}, {});
  EXPECT_FALSE(er.value<fiber::shared<std::vector<int>>>());
}

TEST(shared, objects_sent_apart_are_bounded_together_and_counted_until_they_go) {
  using fiber::detail::publish_shared;
  using fiber::detail::shared_published_bytes;
  auto before = shared_published_bytes();
  auto a = fiber::share(std::vector<char>(60000));
  auto b = fiber::share(std::vector<char>(60000));
  publish_shared(*a.entry(), 100000);
  publish_shared(*a.entry(), 100000);  // once
  EXPECT_EQ(shared_published_bytes(), before + a.bytes());
  fiber_test::expect_error([&] { publish_shared(*b.entry(), 100000); }, fiber::errc::shared_cache_full,
                           {"shared_cache_bytes", "FIBER_SHARED_CACHE_BYTES", "let go of handles"});
  a = {};  // the last handle: its bytes are no longer in use
  EXPECT_EQ(shared_published_bytes(), before);
  publish_shared(*b.entry(), 100000);
  EXPECT_EQ(shared_published_bytes(), before + b.bytes());
}

TEST(shared, an_object_received_in_its_frames_is_held_until_released) {
  auto m = fiber::share(big_model());
  fiber::detail::multipart frames;
  auto bytes = fiber::detail::append_shared(frames, *m.entry(), false);
  EXPECT_EQ(bytes, m.bytes());
  // Here the sender and the receiver are one process: the receiver's table holds its own entry.
  auto held = fiber::detail::shared_held();
  EXPECT_EQ(fiber::detail::receive_shared(frames, 0, 1), frames.size());
  EXPECT_EQ(fiber::detail::shared_held(), held + 1);
  auto e = fiber::detail::find_shared(m.entry()->id());
  ASSERT_TRUE(e);
  EXPECT_NE(e, m.entry()) << "the received entry, not the sender's";
  EXPECT_EQ(e->value<model>()->weights, m->weights);
  fiber::detail::release_shared(m.entry()->id());
  EXPECT_EQ(fiber::detail::shared_held(), held);
}

TEST(shared, an_object_on_this_host_is_one_sealed_copy_in_shared_memory_that_others_map) {
  auto m = fiber::share(big_model());
  fiber::detail::multipart frames;
  EXPECT_EQ(fiber::detail::append_shared(frames, *m.entry(), true), 0u) << "nothing of it goes through the connection";
  ASSERT_EQ(frames.size(), 2u);  // its description and its frames' sizes
  int fd = m.entry()->host_copy();
  EXPECT_EQ(m.entry()->host_copy(), fd) << "one copy";
  // Sealed: nobody can change what the workers map.
  char c = 0;
  EXPECT_EQ(::pwrite(fd, &c, 1, 0), -1);
  fiber::detail::receive_shared(frames, 0, 1);
  auto e = fiber::detail::find_shared(m.entry()->id());
  ASSERT_TRUE(e);
  auto mapped = e->value<model>();
  EXPECT_EQ(mapped->weights, m->weights);
  EXPECT_EQ(mapped->layers, m->layers);
  // Its large frames lie in the mapping, not in copies.
  ASSERT_EQ(e->blobs().size(), 1u);
  EXPECT_NE(e->blobs()[0].data(), m.entry()->blobs()[0].data());
  fiber::detail::release_shared(m.entry()->id());

  // A copy that is not the master's (another size) is refused by name.
  fiber_test::expect_error(
      [&] {
        std::size_t sizes[] = {8};
        (void)fiber::detail::map_host_copy(::getpid(), fd, 7, 0, 3, sizes);
      },
      fiber::errc::malformed_message, "is not the master's copy");
}

TEST(shared, a_span_handle_reads_its_elements_where_they_arrived_without_a_copy) {
  std::vector<float> weights(50000);  // 200 KB
  std::iota(weights.begin(), weights.end(), 0.0f);
  auto w = fiber::share(std::span<const float>(weights));
  EXPECT_NE(w->data(), weights.data()) << "copied in once, when shared";
  weights[0] = -1;  // the caller's array is free again
  EXPECT_EQ((*w)[0], 0.0f);
  EXPECT_EQ(w->size(), 50000u);
  for (bool host : {false, true}) {
    fiber::detail::multipart frames;
    fiber::detail::append_shared(frames, *w.entry(), host);
    fiber::detail::receive_shared(frames, 0, 1);
    auto e = fiber::detail::find_shared(w.entry()->id());
    ASSERT_TRUE(e);
    auto view = e->value<std::span<const float>>();
    ASSERT_EQ(view->size(), 50000u);
    EXPECT_EQ((*view)[49999], 49999.0f);
    // In the frame or the mapping it arrived in: no copy of the elements.
    EXPECT_EQ(static_cast<const void*>(view->data()), static_cast<const void*>(e->blobs()[0].data())) << host;
    fiber::detail::release_shared(w.entry()->id());
    EXPECT_EQ((*view)[1], 1.0f) << "the view keeps what it views alive";
  }
  // Whole, and small enough to lie inline: copied out of the message, aligned.
  auto small = fiber::share(std::span<const double>(std::vector<double>{1.5, 2.5}));
  fiber::writer sw;
  sw.value(small);
  fiber::reader sr({reinterpret_cast<const std::byte*>(sw.head().data()), sw.head().size()}, {});
  auto back = sr.value<fiber::shared<std::span<const double>>>();
  EXPECT_EQ((*back)[1], 2.5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(back->data()) % alignof(double), 0u);
}

// What a worker serves to the workers of other hosts: the object whole to a client with the
// job's key that knows the server's public key (given only through the master's encrypted
// channel), nothing once let go, and a refused handshake to anyone else.
TEST(shared, a_workers_server_gives_an_object_whole_only_to_those_with_its_key) {
  char job_public[41] = {}, job_secret[41] = {};
  ASSERT_EQ(zmq_curve_keypair(job_public, job_secret), 0);
  fiber::detail::curve_pair job{job_public, job_secret};
  auto m = fiber::share(big_model());
  auto& server = fiber::detail::serve_shared_objects(job.public_key);
  EXPECT_TRUE(server.endpoint.starts_with("tcp://")) << server.endpoint;
  auto got = fiber::detail::fetch_shared(server, m.entry()->id(), std::chrono::seconds(30), job);
  auto held = fiber::detail::shared_held();
  fiber::detail::shared_received r;
  EXPECT_EQ(fiber::detail::receive_shared(got, 0, 1, r), got.size());
  EXPECT_EQ(fiber::detail::shared_held(), held + 1);
  auto e = fiber::detail::find_shared(m.entry()->id());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->value<model>()->weights, m->weights);
  fiber::detail::release_shared(m.entry()->id());

  fiber_test::expect_error([&] { (void)fiber::detail::fetch_shared(server, 424242, std::chrono::seconds(30), job); },
                           fiber::errc::malformed_message, "no longer has shared object 424242");

  char other_public[41] = {}, other_secret[41] = {};
  ASSERT_EQ(zmq_curve_keypair(other_public, other_secret), 0);
  // Another server key: the handshake fails.
  fiber::detail::shared_server_address impostor{server.endpoint, other_public};
  fiber_test::expect_error(
      [&] { (void)fiber::detail::fetch_shared(impostor, m.entry()->id(), std::chrono::seconds(30), job); },
      fiber::errc::worker_lost, "refused the handshake");
  // The server's key but a client key of its own (a stranger who learned the address and key):
  // the server's ZAP handler refuses it.
  fiber::detail::curve_pair stranger{other_public, other_secret};
  fiber_test::expect_error(
      [&] { (void)fiber::detail::fetch_shared(server, m.entry()->id(), std::chrono::seconds(30), stranger); },
      fiber::errc::worker_lost, "refused the handshake");
  // A client of the job that sends a megabyte where an id goes is dropped before the server
  // makes room for it, and the server goes on serving.
  {
    zmq::context_t z;
    zmq::socket_t big(z, zmq::socket_type::dealer);
    big.set(zmq::sockopt::linger, 0);
    big.set(zmq::sockopt::curve_serverkey, server.public_key);
    big.set(zmq::sockopt::curve_publickey, job.public_key);
    big.set(zmq::sockopt::curve_secretkey, job.secret_key);
    big.connect(server.endpoint);
    std::string huge(1 << 20, 'x');
    big.send(zmq::buffer(huge), zmq::send_flags::none);
  }
  auto m2 = fiber::share(big_model());
  auto again = fiber::detail::fetch_shared(server, m2.entry()->id(), std::chrono::seconds(30), job);
  EXPECT_GT(again.size(), 1u);
  // Asked again for another job's key, the process's one server says no.
  fiber_test::expect_error([&] { (void)fiber::detail::serve_shared_objects(stranger.public_key); },
                           fiber::errc::protocol_error, "another job's key");
}

// A fetch from a worker that ended fails at once, not after its patience, so that the worker
// asks its master for the object instead (ZeroMQ alone would retry the dead port in silence).
TEST(shared, a_fetch_from_a_worker_that_ended_fails_at_once_naming_it) {
  // A port bound and not listening: a connect is refused, and no test beside this one can take
  // the port meanwhile (a closed one could be bound again by anyone).
  asio::io_context io;
  asio::ip::tcp::acceptor gone(io);
  gone.open(asio::ip::tcp::v4());
  gone.bind({asio::ip::make_address("127.0.0.1"), 0});
  auto endpoint = "tcp://127.0.0.1:" + std::to_string(gone.local_endpoint().port());
  char pub[41] = {}, sec[41] = {};
  ASSERT_EQ(zmq_curve_keypair(pub, sec), 0);
  fiber_test::expect_error(
      [&] { (void)fiber::detail::fetch_shared({endpoint, pub}, 7, std::chrono::hours(1), {pub, sec}); }, fiber::errc::worker_lost,
      {"shared object 7", endpoint, "nothing listens there any more"});
}
