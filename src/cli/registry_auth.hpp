// Credentials for pushing to a registry, found as the docker command finds them: in
// $DOCKER_CONFIG/config.json (default ~/.docker/config.json), its `auths` entry for the registry
// or the credential helper it names (`credHelpers`, `credsStore`). Never asked for: no prompts.
#pragma once
#include <string>

namespace fiber::cli {

struct registry_credentials {
  std::string username, password, source;  // source: where they came from, for messages
};

/// The credentials for `registry` (host[:port]); empty username when there are none.
registry_credentials credentials_for(const std::string& registry);

/// The X-Registry-Auth header's value for them: base64url of their JSON; "e30" ({}) when empty.
std::string registry_auth_header(const registry_credentials& c, const std::string& registry);

/// base64 (standard alphabet, padded) of `data`, and back; decoding junk gives "".
std::string base64_encode(const std::string& data);
std::string base64_decode(const std::string& text);

}  // namespace fiber::cli
