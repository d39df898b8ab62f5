#include "cli/build_context.hpp"

#include <fnmatch.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/tar_archive.hpp"
#include "fiber/error.hpp"
#include "transport/curl_library.hpp"

namespace fiber::cli {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void fail(const std::string& why) { throw fiber::error(fiber::errc::config_error, why); }

std::string read_file(const fs::path& p) { return read_whole_file(p); }

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/// Docker's cleaning of a pattern or path: no leading "/" or "./", no trailing "/".
std::string clean(std::string p) {
  while (p.starts_with("/")) p.erase(0, 1);
  while (p.starts_with("./")) p.erase(0, 2);
  while (p.size() > 1 && p.ends_with("/")) p.pop_back();
  return p;
}

/// The libraries `ldd` names for `program`, with the loader: "NAME => /path (0x..)" or "/path (0x..)".
std::vector<std::string> shared_libraries(const fs::path& program) {
  std::string cmd = "ldd '" + program.string() + "' 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  std::vector<std::string> libs;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    line = trim(line);
    if (line.find("not a dynamic executable") != std::string::npos || line.find("statically linked") != std::string::npos)
      return {};
    if (line.find("=> not found") != std::string::npos)
      fail("program " + program.string() + " needs " + trim(line.substr(0, line.find("=>"))) +
           ", which this machine does not have: install it, or build the image from a Dockerfile");
    auto arrow = line.find("=> ");
    auto path = arrow == std::string::npos ? line : line.substr(arrow + 3);
    path = path.substr(0, path.find(" ("));
    if (path.starts_with("/")) libs.push_back(path);
  }
  return libs;
}

}  // namespace

std::string sha256_hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 15]);
  }
  return out;
}

ignore_rules::ignore_rules(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    line = trim(line);
    if (line.empty() || line.starts_with("#")) continue;
    bool keep = line.starts_with("!");
    if (keep) line = trim(line.substr(1));
    line = clean(line);
    if (!line.empty()) rules_.push_back({line, keep});
  }
}

bool ignore_rules::excluded(const std::string& path) const {
  // As docker's: the last rule that matches the path, or one of the folders holding it, decides.
  bool out = false;
  for (auto& r : rules_) {
    // "**" crosses folders; a single "*" does not.
    int flags = r.pattern.find("**") == std::string::npos ? FNM_PATHNAME : 0;
    bool matched = false;
    for (auto end = path.size(); !matched && end != std::string::npos && end > 0; end = path.rfind('/', end - 1))
      matched = ::fnmatch(r.pattern.c_str(), path.substr(0, end).c_str(), flags) == 0;
    if (matched) out = !r.keep;
  }
  return out;
}

build_context context_of_folder(const fs::path& dir, const std::string& dockerfile) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("build context " + dir.string() + " is not a folder");
  auto df = clean(dockerfile);
  if (!fs::is_regular_file(dir / df, ec))
    fail("no " + df + " in " + dir.string() +
         ": write one (containers/Dockerfile is a start), pass --image IMAGE to run an image that exists, or run a "
         "program built here (the command's first word) without a Dockerfile");
  ignore_rules ignore(fs::exists(dir / ".dockerignore") ? read_file(dir / ".dockerignore") : std::string());
  std::vector<std::string> paths;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    auto rel = fs::relative(it->path(), dir).generic_string();
    if (rel == df || rel == ".dockerignore" || !ignore.excluded(rel)) paths.push_back(rel);
    else if (it->is_directory() && !it->is_symlink()) it.disable_recursion_pending();
  }
  if (ec) fail("cannot read the build context " + dir.string() + ": " + ec.message());
  std::sort(paths.begin(), paths.end());
  tar_writer tar;
  build_context out;
  for (auto& rel : paths) {
    auto p = dir / rel;
    auto st = fs::symlink_status(p);
    int mode = static_cast<int>(st.permissions()) & 07777;
    if (fs::is_symlink(st)) tar.symlink(rel, fs::read_symlink(p).string());
    else if (fs::is_directory(st)) tar.directory(rel, mode);
    else if (fs::is_regular_file(st)) {
      tar.file(rel, read_file(p), mode);
      ++out.files;
    }
  }
  out.tar = tar.finish();
  out.dockerfile = df;
  out.digest = sha256_hex(out.tar);
  return out;
}

fs::path program_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    auto end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    auto dir = dirs.substr(start, end - start);
    auto candidate = fs::path(dir.empty() ? "." : dir) / program;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  fail("program " + program + " is not on PATH (" + dirs + "): give its path, as in ./" + program);
}

build_context context_of_program(const fs::path& program) {
  std::error_code ec;
  auto exe = fs::canonical(program, ec);
  if (ec || !fs::is_regular_file(exe)) fail("program " + program.string() + " is not a file here");
  if (::access(exe.c_str(), X_OK) != 0) fail("program " + program.string() + " is not executable");
  auto bytes = read_file(exe);
  if (!bytes.starts_with("\x7f" "ELF"))
    fail(program.string() + " is not a compiled program (ELF), so fiber cannot make its image: write a Dockerfile "
                            "beside it, or pass --image IMAGE");
  tar_writer tar;
  build_context out;
  std::string dockerfile = "FROM scratch\nCOPY rootfs/ /\nLABEL fiber.program=\"" + exe.string() + "\"\n";
  tar.file("Dockerfile", dockerfile, 0644);
  tar.directory("rootfs", 0755);
  tar.directory("rootfs/tmp", 01777);
  std::vector<std::pair<std::string, fs::path>> files{{exe.string(), exe}};
  for (auto& lib : shared_libraries(exe)) files.emplace_back(lib, fs::path(lib));
  // fiber loads libcurl when a master first calls an engine's API (transport/curl_library), and
  // the master of a run in a container starts its workers through Docker's or Kubernetes' API:
  // the image holds libcurl and what it links, which the program's own list does not name.
  auto curl = fiber::detail::curl_file();
  files.emplace_back(curl, fs::path(curl));
  for (auto& lib : shared_libraries(curl)) files.emplace_back(lib, fs::path(lib));
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  for (auto& [at, from] : files) {
    tar.file("rootfs" + at, at == exe.string() ? bytes : read_file(from), 0755);  // read through links
    ++out.files;
  }
  out.tar = tar.finish();
  out.dockerfile = "Dockerfile";
  out.digest = sha256_hex(out.tar);
  return out;
}

}  // namespace fiber::cli
