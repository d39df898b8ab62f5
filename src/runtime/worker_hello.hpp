// A worker's first words to its master, and the config in the master's answer: said when the
// worker starts, and again when a master that took a durable run up links it again.
#pragma once
#include <string>

#include "fiber/config.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {
class runtime;

/// The worker's hello: who it is, where, and the one-time word the master gave it.
void send_hello(runtime& rt, const std::string& nonce);
/// Finds what is the same for every child of this process (its executable, its build, its host
/// and process namespace, the table of config keys a welcome is read with), so that children
/// forked from here inherit it instead of each finding it again on its way to its first task.
void prepare_hello_and_welcome();
/// The config a welcome carries (its second frame); throws when it is unreadable.
fiber::config welcome_config(const multipart& welcome);

}  // namespace fiber::detail
