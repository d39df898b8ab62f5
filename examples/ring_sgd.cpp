// Data-parallel SGD in C++ with fiber::ring: each member trains the same linear model on its own
// shard of a synthetic regression problem (generated from a seed), gradients are averaged with
// allreduce, rank 0 prints the loss per epoch, and at the end every member checks that all hold
// the same weights.
//   build/examples/ring_sgd [members=4] [epochs=30]
#include <fiber/fiber.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

namespace {
constexpr int dim = 16, samples_per_member = 4096;
int epochs = 30;  // set from the command line in the master; members get it from the store

struct shard {
  std::vector<double> x, y;  // x: samples × dim, row-major
};

// The problem every member agrees on (seed 7), and this member's samples of it.
shard make_shard(int rank, std::vector<double>& truth) {
  std::mt19937_64 world(7);
  std::normal_distribution<double> normal;
  truth.resize(dim + 1);
  for (auto& w : truth) w = normal(world);
  std::mt19937_64 mine(1000 + static_cast<std::uint64_t>(rank));
  shard s;
  s.x.resize(static_cast<std::size_t>(samples_per_member) * dim);
  s.y.resize(samples_per_member);
  for (int i = 0; i < samples_per_member; ++i) {
    double y = truth[dim];  // bias
    for (int j = 0; j < dim; ++j) {
      double v = normal(mine);
      s.x[static_cast<std::size_t>(i) * dim + j] = v;
      y += truth[j] * v;
    }
    s.y[i] = y + 0.1 * normal(mine);
  }
  return s;
}

void train(fiber::ring_member& me) {
  if (me.rank() == 0) me.set("epochs", std::to_string(epochs)).get();
  int rounds = std::stoi(me.get("epochs").get());
  std::vector<double> truth;
  auto data = make_shard(me.rank(), truth);
  std::vector<double> w(dim + 1, 0.0);
  me.broadcast(std::span<double>(w), 0);  // the same start everywhere
  const double rate = 0.1;
  for (int epoch = 0; epoch < rounds; ++epoch) {
    // grad[0..dim] and, last, the sum of squared errors: one allreduce for both.
    std::vector<double> grad(dim + 2, 0.0);
    for (int i = 0; i < samples_per_member; ++i) {
      const double* x = &data.x[static_cast<std::size_t>(i) * dim];
      double err = w[dim] - data.y[i];
      for (int j = 0; j < dim; ++j) err += w[j] * x[j];
      for (int j = 0; j < dim; ++j) grad[j] += err * x[j];
      grad[dim] += err;
      grad[dim + 1] += err * err;
    }
    me.allreduce(std::span<double>(grad));
    double n = static_cast<double>(samples_per_member) * me.size();
    for (int j = 0; j <= dim; ++j) w[j] -= rate * grad[j] / n;
    if (me.rank() == 0) std::printf("epoch %2d  loss %.6f\n", epoch, grad[dim + 1] / n);
  }
  // Every member must hold the same bits: gather each one's weights and compare.
  std::vector<double> all(static_cast<std::size_t>(me.size()) * w.size());
  me.allgather(std::span<const double>(w), std::span<double>(all));
  for (int k = 0; k < me.size(); ++k)
    if (std::memcmp(&all[static_cast<std::size_t>(k) * w.size()], w.data(), w.size() * sizeof(double)) != 0)
      throw std::runtime_error("rank " + std::to_string(k) + " holds other weights than rank " + std::to_string(me.rank()));
  if (me.rank() == 0) {
    double off = 0;
    for (int j = 0; j <= dim; ++j) off = std::max(off, std::abs(w[j] - truth[j]));
    std::printf("largest distance to the truth %.4f\n", off);
  }
}
}  // namespace
FIBER_REMOTE(train);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  int members = argc > 1 ? std::atoi(argv[1]) : 4;
  if (argc > 2) epochs = std::atoi(argv[2]);
  fiber::ring r(members, &train);
  r.start().get();
  r.join().get();  // a member that disagreed (or failed) is errc::member_lost here
  std::printf("%d members agree on the weights\n", members);
  return 0;
}
