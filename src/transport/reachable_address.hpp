// The address of this host that the master's network reaches: what a peer on another host dials
// (a ring's members, a worker serving a shared object).
#pragma once
#include <string>

namespace fiber::detail {

/// The source address of the route to the master; loopback when the master is on this host.
std::string reachable_address();

/// The address of this host that packets to `host` leave from (a UDP connect: nothing is sent);
/// empty when there is no route.
std::string source_address_towards(const std::string& host);

}  // namespace fiber::detail
