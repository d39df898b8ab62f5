#include "runtime/nested/spawn_wire.hpp"

#include <boost/json.hpp>

#include "fiber/error.hpp"

namespace fiber::detail::spawn_wire {

std::string encode(const spawn_spec& spec, std::uint64_t parent) {
  boost::json::array args, env;
  for (auto& a : spec.args) args.emplace_back(a);
  for (auto& [k, v] : spec.env) env.emplace_back(boost::json::array{boost::json::string(k), boost::json::string(v)});
  return boost::json::serialize(boost::json::object{{"name", spec.name},
                                                    {"job_id", spec.job_id},
                                                    {"executable", spec.executable},
                                                    {"args", std::move(args)},
                                                    {"env", std::move(env)},
                                                    {"secret", spec.secret},
                                                    {"cpu", spec.cpu},
                                                    {"cpu_declared", spec.cpu_declared},
                                                    {"memory_mb", spec.memory_mb},
                                                    {"gpu", spec.gpu},
                                                    {"parent", parent}});
}

spawn_spec decode_spec(std::string_view text, std::uint64_t& parent) {
  try {
    auto o = boost::json::parse(text).as_object();
    spawn_spec spec;
    spec.name = o.at("name").as_string();
    spec.job_id = o.at("job_id").as_string();
    spec.executable = o.at("executable").as_string();
    for (auto& a : o.at("args").as_array()) spec.args.emplace_back(a.as_string());
    for (auto& kv : o.at("env").as_array())
      spec.env.emplace_back(std::string(kv.as_array().at(0).as_string()), std::string(kv.as_array().at(1).as_string()));
    spec.secret = o.at("secret").as_string();
    spec.cpu = static_cast<int>(o.at("cpu").as_int64());
    spec.cpu_declared = o.at("cpu_declared").as_bool();
    spec.memory_mb = static_cast<int>(o.at("memory_mb").as_int64());
    spec.gpu = static_cast<int>(o.at("gpu").as_int64());
    parent = boost::json::value_to<std::uint64_t>(o.at("parent"));
    return spec;
  } catch (const std::exception& e) {
    throw error(errc::protocol_error, std::string("unreadable request to start a nested child: ") + e.what());
  }
}

std::string encode(const child_news& told) {
  boost::json::object o{{"pid", told.pid}, {"code", told.code}, {"detail", told.detail}, {"never_fits", told.never_fits}};
  if (told.memory) {
    o["memory_limit_mb"] = told.memory->limit_mb;
    o["memory_peak_mb"] = told.memory->peak_mb;
  }
  return boost::json::serialize(o);
}

child_news decode_news(std::string_view text) {
  child_news told;
  try {
    auto o = boost::json::parse(text).as_object();
    told.pid = static_cast<int>(o.at("pid").as_int64());
    told.code = static_cast<int>(o.at("code").as_int64());
    told.detail = o.at("detail").as_string();
    told.never_fits = o.at("never_fits").as_bool();
    if (auto* limit = o.if_contains("memory_limit_mb"))
      told.memory = memory_stop{limit->to_number<std::uint64_t>(), o.at("memory_peak_mb").to_number<std::uint64_t>()};
  } catch (const std::exception& e) {
    told.code = -1;
    told.detail = std::string("unreadable news of the child from the master above: ") + e.what();
  }
  return told;
}

}  // namespace fiber::detail::spawn_wire
