// Evolution strategies with fiber::pool and fiber::shared: each generation shares its parameter
// vector once, and every task of the population holds the handle and a seed. A worker gets the
// vector once per generation (on this machine it maps the master's one copy), however many of
// the population's tasks it runs. The objective is a shifted sphere in `dim` dimensions; the
// master prints the distance to its optimum as it falls.
//   build/examples/evolution_strategies [generations=60] [population=64] [dim=100000]
#include <fiber/fiber.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {
using params = fiber::shared<std::vector<double>>;

double optimum(std::size_t i) { return std::sin(static_cast<double>(i)); }

// Fitness of theta + sigma * noise(seed), and of theta - sigma * noise(seed) (antithetic pairs
// halve the noise of the estimate): the master regenerates the same noise from the seed.
std::pair<double, double> evaluate(const params& theta, std::uint64_t seed, double sigma) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  double plus = 0, minus = 0;
  for (std::size_t i = 0; i < theta->size(); ++i) {
    double e = normal(rng), t = (*theta)[i] - optimum(i);
    plus -= (t + sigma * e) * (t + sigma * e);
    minus -= (t - sigma * e) * (t - sigma * e);
  }
  return {plus, minus};
}
}  // namespace
FIBER_REMOTE(evaluate);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  int generations = argc > 1 ? std::atoi(argv[1]) : 60;
  int population = argc > 2 ? std::atoi(argv[2]) : 64;
  std::size_t dim = argc > 3 ? static_cast<std::size_t>(std::atoll(argv[3])) : 100000;
  const double sigma = 0.05, rate = 0.5;

  fiber::pool pool;
  std::vector<double> theta(dim, 0.0);
  auto distance = [&] {
    double d = 0;
    for (std::size_t i = 0; i < dim; ++i) d += (theta[i] - optimum(i)) * (theta[i] - optimum(i));
    return std::sqrt(d);
  };
  double first = distance();
  std::printf("generation 0: distance to the optimum %.3f\n", first);
  for (int g = 1; g <= generations; ++g) {
    auto shared_theta = fiber::share(theta);  // this generation's parameters, once
    std::vector<std::tuple<params, std::uint64_t, double>> tasks;
    for (int k = 0; k < population; ++k) tasks.emplace_back(shared_theta, std::uint64_t(g) * 100000 + k, sigma);
    auto fitness = pool.starmap(&evaluate, tasks).get();

    // The gradient estimate: each pair's fitness difference along its noise, normalized.
    double mean = 0, var = 0;
    for (auto& [p, m] : fitness) mean += p - m;
    mean /= population;
    for (auto& [p, m] : fitness) var += (p - m - mean) * (p - m - mean);
    double scale = std::sqrt(var / population) + 1e-12;
    std::vector<double> step(dim, 0.0);
    for (int k = 0; k < population; ++k) {
      std::mt19937_64 rng(std::get<1>(tasks[k]));
      std::normal_distribution<double> normal;
      double w = (fitness[k].first - fitness[k].second - mean) / scale;
      for (std::size_t i = 0; i < dim; ++i) step[i] += w * normal(rng);
    }
    for (std::size_t i = 0; i < dim; ++i) theta[i] += rate * sigma * step[i] / population;
    if (g % 10 == 0 || g == generations) std::printf("generation %d: distance to the optimum %.3f\n", g, distance());
  }
  auto s = pool.stats();
  double last = distance();
  std::printf("%s: %.3f -> %.3f; the parameters went to the workers %zu times (%llu bytes in messages, %llu in this host's memory)\n",
              last < first ? "improved" : "did not improve", first, last, s.shared_objects_sent,
              static_cast<unsigned long long>(s.shared_bytes_sent), static_cast<unsigned long long>(s.shared_bytes_host));
  return last < first ? 0 : 1;
}
