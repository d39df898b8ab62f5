#include "runtime/nested/spawn_policy.hpp"

#include "core/worker_env.hpp"

namespace fiber::detail {

std::string spawn_refusal(const spawn_spec& spec, int depth, const spawn_limits& limits) {
  if (depth > limits.max_depth)
    return "it would be at depth " + std::to_string(depth) + " of the tree, and config max_depth is " +
           std::to_string(limits.max_depth);
  if (spec.executable != limits.program)
    return "it names the program '" + spec.executable + "', and this run starts only its own ('" + limits.program +
           "')";
  if (spec.args.size() != 1 || spec.args[0] != worker_flag)
    return std::string("it asks for arguments other than ") + worker_flag;
  for (auto& [name, value] : spec.env)
    if (!name.starts_with("FIBER_") || name == env_keys || name == env_keys_file)
      return "it sets the environment variable " + name + ", which is not fiber's to pass";
  if (!spec.host.empty() || spec.whole_host) return "it names a host, which only the top master chooses";
  return {};
}

}  // namespace fiber::detail
