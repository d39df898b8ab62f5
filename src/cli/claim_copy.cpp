#include "cli/claim_copy.hpp"

#include <vector>

#include "fiber/error.hpp"

namespace fiber::cli {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& why) { throw error(errc::config_error, why); }

/// A path inside a claim, relative and without "." parts; fiber::error for "..".
std::string inside(const std::string& text, const std::string& shown) {
  std::string out;
  std::size_t at = 0;
  while (at <= text.size()) {
    auto next = text.find('/', at);
    auto part = text.substr(at, next == std::string::npos ? std::string::npos : next - at);
    if (part == "..") fail(shown + " leaves its claim (\"..\"): name a path inside it");
    if (!part.empty() && part != ".") out += (out.empty() ? "" : "/") + part;
    if (next == std::string::npos) break;
    at = next + 1;
  }
  return out;
}

std::string last_part(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

copy_plan plan_copy(const std::string& src, const std::string& dst) {
  auto from = parse_claim_path(src), to = parse_claim_path(dst);
  if (from && to) fail("fiber cp copies between a claim and this machine, not between claims: copy " + src + " here first");
  if (!from && !to)
    fail("fiber cp needs one side as CLAIM:PATH (e.g. results:/logs), the other a local path; " + src + " and " + dst +
         " are both local (write ./" + src + " for a local name with a ':')");
  copy_plan p;
  if (to) {
    p.upload = true;
    p.claim = to->claim;
    p.local = src;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(p.local, ec))) fail("cannot copy " + src + ": no such file or folder here");
    auto name = fs::absolute(p.local).lexically_normal().filename().string();
    if (name.empty()) name = fs::absolute(p.local).lexically_normal().parent_path().filename().string();
    auto where = inside(to->path, dst);
    bool into = where.empty() || to->path.ends_with('/');
    p.in_claim = into ? (where.empty() ? name : where + "/" + name) : where;
    return p;
  }
  p.claim = from->claim;
  p.in_claim = inside(from->path, src);
  auto name = p.in_claim.empty() ? from->claim : last_part(p.in_claim);
  fs::path local = dst;
  std::error_code ec;
  if (dst.ends_with('/') || fs::is_directory(local, ec)) {
    p.local_parent = local;
    p.local_name = name;
  } else {
    p.local_parent = local.has_parent_path() ? local.parent_path() : fs::path(".");
    p.local_name = local.filename().string();
  }
  return p;
}

}  // namespace fiber::cli
