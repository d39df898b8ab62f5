// A Kubernetes run's tokens (its dashboard's, and the recording hand-over's of `fiber run
// --attach`) in a Secret of the run, owned by its Job and mounted in the master's pod. A reader of
// the namespace sees the pod's spec and its log, never a Secret: the spec names the files, and the
// master prints its page's address without the token. `fiber dashboard` reads the token from the
// Secret with the user's own credentials.
#pragma once
#include <boost/json/object.hpp>
#include <map>
#include <string>

namespace fiber::cli {

/// Where the master's pod mounts the Secret, and the files in it.
inline constexpr const char* run_tokens_mount = "/var/run/fiber-run";
inline constexpr const char* dashboard_token_key = "dashboard";
inline constexpr const char* recording_token_key = "recording";

/// The Secret's name for run `run`.
std::string run_tokens_name(const std::string& run);

/// The Secret holding `tokens` (key → token), owned by the run's Job `run` with uid `job_uid`
/// (the cluster deletes it with the Job), labelled with `labels`.
boost::json::object run_tokens_manifest(const std::string& run, const std::string& job_uid,
                                        const boost::json::object& labels, const std::map<std::string, std::string>& tokens);

/// Token `key` from a Secret as the API server returns it (base64 data); empty when it has none.
std::string token_in_secret(const boost::json::value& secret, const std::string& key);

}  // namespace fiber::cli
