// The life of a host hub's process (runtime/hubs/host_hub): started by its master's backend on a host
// (runtime/hubs/host_hubs) with hub_flag, it links to the master as a hub, listens for the host's
// children, relays until the master's link closes, and exits.
#pragma once

namespace fiber::detail {

/// The process's exit code: 0 once its master's link closed, exit_master_lost when it never
/// reached the master, 2 on a bad environment, 3 when it cannot listen (another hub has this
/// host's name: the children find that one).
int run_hub_process();

}  // namespace fiber::detail
