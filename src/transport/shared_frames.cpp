#include "transport/shared_frames.hpp"

#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "fiber/error.hpp"

namespace fiber::detail {
namespace {
void release_keep(void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }
[[noreturn]] void malformed(const char* what) {
  throw error(errc::malformed_message, std::string("malformed shared object: ") + what);
}
shared_desc desc_of(const shared_entry& e, std::uint8_t how) {
  shared_desc d;
  d.id = e.id();
  d.type = e.type();
  d.head = e.head().size();
  d.blobs = static_cast<std::uint32_t>(e.blobs().size());
  d.how = how;
  return d;
}
}  // namespace

std::size_t append_shared_frames(multipart& m, const shared_entry& e, bool host_it, bool report) {
  auto d = desc_of(e, shared_desc::frames);
  d.host_it = host_it ? 1 : 0;
  d.report = report ? 1 : 0;
  m.emplace_back(&d, sizeof d);
  m.emplace_back(e.head().data(), e.head().size());
  std::size_t bytes = e.head().size();
  for (auto& b : e.blobs()) {
    // Zero-copy: ZeroMQ lets go of the entry's frames by dropping this reference.
    m.emplace_back(const_cast<std::byte*>(b.data()), b.size(), &release_keep, new std::shared_ptr<const void>(e.keep()));
    bytes += b.size();
  }
  return bytes;
}

void append_shared_host(multipart& m, const shared_entry& e, int pid, int fd) {
  auto d = desc_of(e, shared_desc::host_memory);
  d.pid = pid;
  d.fd = fd;
  std::vector<std::uint64_t> sizes;
  for (auto& b : e.blobs()) sizes.push_back(b.size());
  m.emplace_back(&d, sizeof d);
  m.emplace_back(sizes.data(), sizes.size() * sizeof(std::uint64_t));
}

void append_shared_from_peer(multipart& m, const shared_entry& e, const std::string& endpoint,
                             const std::string& public_key, bool host_it) {
  auto d = desc_of(e, shared_desc::from_peer);
  d.host_it = host_it ? 1 : 0;
  d.report = 1;
  m.emplace_back(&d, sizeof d);
  auto where = endpoint + "\n" + public_key;
  m.emplace_back(where.data(), where.size());
}

void append_shared_later(multipart& m, const shared_entry& e) {
  auto d = desc_of(e, shared_desc::later);
  m.emplace_back(&d, sizeof d);
}

std::size_t append_shared(multipart& m, const shared_entry& e, bool host_memory) {
  if (!host_memory) return append_shared_frames(m, e);
  append_shared_host(m, e, static_cast<int>(::getpid()), e.host_copy());
  return 0;
}

std::size_t receive_shared(multipart& m, std::size_t at, std::size_t count, shared_received& out) {
  for (std::size_t k = 0; k < count; ++k) {
    if (at >= m.size() || m[at].size() != sizeof(shared_desc)) malformed("missing description");
    shared_desc d;
    std::memcpy(&d, m[at].data(), sizeof d);
    ++at;
    if (d.how == shared_desc::later) {
      out.later.push_back(d.id);
      continue;
    }
    if (d.how == shared_desc::from_peer) {
      if (at >= m.size()) malformed("missing peer");
      auto where = m[at++].to_string();
      auto nl = where.find('\n');
      if (nl == std::string::npos) malformed("peer without a key");
      out.to_fetch.push_back({d.id, where.substr(0, nl), where.substr(nl + 1), d.host_it != 0});
      continue;
    }
    if (d.how == shared_desc::host_memory) {
      if (at >= m.size() || m[at].size() != std::size_t(d.blobs) * sizeof(std::uint64_t)) malformed("missing sizes");
      std::vector<std::size_t> sizes(d.blobs);
      for (std::uint32_t i = 0; i < d.blobs; ++i) {
        std::uint64_t s;
        std::memcpy(&s, static_cast<const char*>(m[at].data()) + i * sizeof s, sizeof s);
        sizes[i] = static_cast<std::size_t>(s);
      }
      ++at;
      try {
        hold_shared(map_host_copy(d.pid, d.fd, d.id, d.type, static_cast<std::size_t>(d.head), sizes));
      } catch (const std::exception& e) {
        // The copy's maker may have ended since: the sender sends the object itself instead.
        out.failed.push_back(d.id);
        out.why_failed = e.what();
      }
      continue;
    }
    if (d.how != shared_desc::frames) malformed("unknown form");
    if (at >= m.size() || d.blobs > m.size() - at - 1 || m[at].size() != d.head) malformed("missing frames");
    std::string head(static_cast<const char*>(m[at].data()), m[at].size());
    ++at;
    // The frames move into what keeps them: their bytes stay where they are.
    auto kept = std::make_shared<multipart>();
    kept->reserve(d.blobs);
    for (std::uint32_t i = 0; i < d.blobs; ++i) kept->push_back(std::move(m[at++]));
    std::vector<std::span<const std::byte>> spans;
    for (auto& f : *kept) spans.emplace_back(static_cast<const std::byte*>(f.data()), f.size());
    auto e = std::make_shared<const shared_entry>(d.id, d.type, std::move(head), std::move(spans), std::move(kept));
    hold_shared(e);
    if (d.report) out.to_report.push_back(d.id);
    if (d.host_it) out.to_host.push_back(std::move(e));
  }
  return at;
}

std::size_t receive_shared(multipart& m, std::size_t at, std::size_t count) {
  shared_received r;
  at = receive_shared(m, at, count, r);
  if (!r.failed.empty()) throw error(errc::malformed_message, r.why_failed);
  if (!r.later.empty() || !r.to_fetch.empty()) malformed("an object announced for later where none can follow");
  return at;
}

}  // namespace fiber::detail
