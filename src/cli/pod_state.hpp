// What the `fiber` command reads of a pod: its state in a few words, from JSON that may lack
// anything (a pod just made has no status yet).
#pragma once
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fiber::cli {

const boost::json::object* obj(const boost::json::value* v);
const boost::json::object* obj(const boost::json::object* o, std::string_view key);
const boost::json::array* arr(const boost::json::object* o, std::string_view key);
std::string str(const boost::json::object* o, std::string_view key);
std::int64_t num(const boost::json::object* o, std::string_view key);

/// What a pod is doing, in a few words, and whether it has ended (with its exit code). A container
/// the runtime could not exec (StartError) has an exit code (128) but has not started.
struct pod_state {
  std::string phase, reason;  // reason: a waiting reason and message, Unschedulable's message, ...
  bool unschedulable = false, started = false;
  bool hopeless = false;  // it cannot start: a pull that failed, a bad configuration, a program it could not exec
  std::optional<int> exit_code;
};
pod_state state_of(const boost::json::object& pod);

}  // namespace fiber::cli
