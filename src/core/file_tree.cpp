#include "core/file_tree.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <ranges>
#include <vector>

#include "fiber/error.hpp"

namespace fiber::detail {
namespace fs = std::filesystem;

namespace {

// "fiber-tree/1\n", then per entry: kind ('d', 'f', 'l'), mode (u32), path length (u32), path,
// content length (u64), content; integers little-endian, whatever the machines at either end.
constexpr std::string_view magic = "fiber-tree/1\n";

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

[[noreturn]] void cannot(const std::string& what, const fs::path& p, const std::string& why) {
  throw error(errc::config_error, "cannot " + what + " " + p.string() + ": " + why);
}

class packer {
 public:
  packer(std::string& out, std::uint64_t max_bytes) : out_(out), max_(max_bytes) {}

  void add(const fs::path& local, const std::string& path) {
    std::error_code ec;
    auto st = fs::symlink_status(local, ec);
    if (ec) cannot("read", local, ec.message());
    auto mode = static_cast<std::uint32_t>(st.permissions()) & 07777;
    if (fs::is_symlink(st)) {
      auto target = fs::read_symlink(local, ec);
      if (ec) cannot("read the link", local, ec.message());
      return entry('l', mode, path, target.string());
    }
    if (fs::is_directory(st)) {
      entry('d', mode, path, {});
      std::vector<fs::path> children;
      for (fs::directory_iterator it(local, ec), end; !ec && it != end; it.increment(ec)) children.push_back(it->path());
      if (ec) cannot("list", local, ec.message());
      std::sort(children.begin(), children.end());  // the same tree packs to the same bytes
      for (auto& c : children) add(c, (path.empty() ? "" : path + "/") + c.filename().string());
      return;
    }
    if (!fs::is_regular_file(st)) return;  // a socket, a device, a FIFO: nothing to copy
    std::ifstream in(local, std::ios::binary);
    if (!in) cannot("read", local, std::strerror(errno));
    auto size = fs::file_size(local, ec);
    if (ec) cannot("read", local, ec.message());
    std::string data(size, '\0');
    if (size && !in.read(data.data(), static_cast<std::streamsize>(size))) cannot("read", local, "it changed while read");
    entry('f', mode, path, data);
  }

 private:
  void entry(char kind, std::uint32_t mode, const std::string& path, std::string_view content) {
    if (out_.size() + 17 + path.size() + content.size() > max_)
      throw error(errc::message_too_large, "the copy is over " + std::to_string(max_) +
                                               " bytes (max_message_bytes): it passes through memory whole; copy "
                                               "its parts one by one, or raise max_message_bytes");
    out_.push_back(kind);
    put_u32(out_, mode);
    put_u32(out_, static_cast<std::uint32_t>(path.size()));
    out_ += path;
    put_u64(out_, content.size());
    out_.append(content);
  }
  std::string& out_;
  std::uint64_t max_;
};

class reader {
 public:
  explicit reader(std::string_view in) : in_(in) {}
  bool done() const { return at_ == in_.size(); }
  std::uint64_t number(int bytes) {
    need(bytes);
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(in_[at_ + i])) << (8 * i);
    at_ += bytes;
    return v;
  }
  std::string_view bytes(std::uint64_t n) {
    need(n);
    auto out = in_.substr(at_, n);
    at_ += n;
    return out;
  }

 private:
  void need(std::uint64_t n) {
    if (n > in_.size() - at_) throw error(errc::malformed_message, "a packed file tree ends in the middle of an entry");
  }
  std::string_view in_;
  std::size_t at_ = 0;
};

/// Checks an entry's path: relative, no "." or ".." parts, no empty parts, no NUL.
void check_path(std::string_view path) {
  if (path.find('\0') != std::string_view::npos || path.starts_with('/'))
    throw error(errc::malformed_message, "a packed file tree names an absolute or broken path");
  std::size_t at = 0;
  while (!path.empty() && at <= path.size()) {
    auto next = path.find('/', at);
    auto part = path.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
    if (part.empty() || part == "." || part == "..")
      throw error(errc::malformed_message, "a packed file tree names a path that leaves it: " + std::string(path));
    if (next == std::string_view::npos) break;
    at = next + 1;
  }
}

/// Refuses to write through a link: each part from `root` down to `target` that exists must be
/// no symbolic link (`target` itself may be one: it is replaced).
void check_no_link_between(const fs::path& root, const fs::path& target) {
  fs::path at = root;
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(at, ec)))
    cannot("write into", at, "it is a symbolic link (fiber does not write through links)");
  auto rel = target.lexically_relative(root);
  auto last = std::prev(rel.end());
  for (auto it = rel.begin(); it != rel.end() && it != last; ++it) {
    at /= *it;
    if (fs::is_symlink(fs::symlink_status(at, ec)))
      cannot("write into", at, "it is a symbolic link (fiber does not write through links)");
  }
}

void apply_mode(const fs::path& p, std::uint32_t mode) {
  std::error_code ec;
  fs::permissions(p, static_cast<fs::perms>(mode & 0777), fs::perm_options::replace, ec);
  if (ec) cannot("set the mode of", p, ec.message());
}

}  // namespace

std::string pack_tree(const fs::path& local, std::uint64_t max_bytes) {
  std::string out(magic);
  packer(out, max_bytes).add(local, "");
  return out;
}

std::size_t unpack_tree(std::string_view packed, const fs::path& parent, const std::string& top) {
  if (!packed.starts_with(magic)) throw error(errc::malformed_message, "not a packed file tree (fiber-tree/1)");
  check_path(top);
  if (top.empty()) throw error(errc::malformed_message, "a packed file tree needs a name to land under");
  reader r(packed.substr(magic.size()));
  auto root = parent / top;
  struct link {
    fs::path at;
    std::string target;
  };
  std::vector<link> links;
  std::vector<std::pair<fs::path, std::uint32_t>> folders;  // modes set last: a read-only folder still fills
  std::size_t written = 0;
  std::error_code ec;
  while (!r.done()) {
    char kind = static_cast<char>(r.number(1));
    auto mode = static_cast<std::uint32_t>(r.number(4));
    auto path = r.bytes(r.number(4));
    auto content = r.bytes(r.number(8));
    check_path(path);
    if (written == 0 && !path.empty()) throw error(errc::malformed_message, "a packed file tree does not start with its top");
    if (written > 0 && path.empty()) throw error(errc::malformed_message, "a packed file tree names its top twice");
    auto at = path.empty() ? root : root / fs::path(std::string(path));
    check_no_link_between(parent, at);
    auto st = fs::symlink_status(at, ec);
    switch (kind) {
      case 'd':
        if (fs::is_symlink(st) || (fs::exists(st) && !fs::is_directory(st))) fs::remove(at, ec);
        if (!fs::is_directory(fs::symlink_status(at, ec)) && !fs::create_directory(at, ec) && ec)
          cannot("make the folder", at, ec.message());
        folders.emplace_back(at, mode);
        break;
      case 'f': {
        if (fs::is_directory(st)) cannot("write the file", at, "a folder of that name is there");
        if (fs::is_symlink(st)) fs::remove(at, ec);
        std::ofstream out(at, std::ios::binary | std::ios::trunc);
        if (!out || !out.write(content.data(), static_cast<std::streamsize>(content.size())) || !out.flush())
          cannot("write", at, std::strerror(errno));
        out.close();
        apply_mode(at, mode);
        break;
      }
      case 'l':
        if (fs::is_directory(st) && !fs::is_symlink(st)) cannot("make the link", at, "a folder of that name is there");
        links.push_back({at, std::string(content)});
        break;
      default:
        throw error(errc::malformed_message, "a packed file tree holds an entry of unknown kind");
    }
    ++written;
  }
  if (written == 0) throw error(errc::malformed_message, "a packed file tree with no entry");
  for (auto& l : links) {
    fs::remove(l.at, ec);
    fs::create_symlink(l.target, l.at, ec);
    if (ec) cannot("make the link", l.at, ec.message());
  }
  for (const auto& [folder, mode] : std::views::reverse(folders)) apply_mode(folder, mode);
  return written;
}

}  // namespace fiber::detail
