// What a host hub and its master say to each other (docs/design.md, "Host hubs"). A hub is one
// process on a host that the host's children reach over unix sockets and that reaches the master
// over one TLS link, so the master writes one TCP stream per host instead of one per child, and
// what one turn of either loop sends for a host goes in one write and one encryption.
//
// Every message on a hub's link starts with a relay frame: an op byte, then a child's routing id.
//   joined  hub -> master  the child proved the job's password to the hub; no parts follow
//   left    hub -> master  the child's link to the hub closed
//   message both ways      the child's message (its parts follow, header first)
//   refused master -> hub  the master does not expect this child: the hub closes its link
//   pulse   hub -> master  no child: the hub sent nothing else for an interval, and is alive
//
// hub_workers=fork: the master has the hub start its host's children (runtime/hubs/hub_forks). These
// name a start by the master's number for it, not a routing id:
//   start   master -> hub  fork a child: spawn_wire::encode(spec) follows
//   signal  master -> hub  signal that child: the signal follows, in decimal
//   news    hub -> master  what became of it: spawn_wire::event in decimal, spawn_wire::encode(news)
#pragma once
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "transport/zmq_channel.hpp"

namespace fiber::detail::hub_wire {

enum class op : char {
  joined = 'J',
  left = 'L',
  message = 'M',
  refused = 'R',
  pulse = 'P',
  start = 'S',
  signal = 'K',
  news = 'N',
};

inline zmq::message_t frame(op o, std::string_view id) {
  zmq::message_t m(1 + id.size());
  auto* p = static_cast<char*>(m.data());
  p[0] = static_cast<char>(o);
  if (!id.empty()) std::memcpy(p + 1, id.data(), id.size());
  return m;
}

/// The op and child of a relay frame; nullopt when it is none.
inline std::optional<std::pair<op, std::string_view>> parse(const zmq::message_t& m) {
  if (m.empty()) return std::nullopt;
  auto s = m.to_string_view();
  switch (static_cast<op>(s[0])) {
    case op::joined:
    case op::left:
    case op::message:
    case op::refused:
    case op::start:
    case op::signal:
    case op::news:
      if (s.size() < 2) return std::nullopt;  // no child named
      return std::pair{static_cast<op>(s[0]), s.substr(1)};
    case op::pulse: return std::pair{op::pulse, std::string_view()};
  }
  return std::nullopt;
}

}  // namespace fiber::detail::hub_wire
