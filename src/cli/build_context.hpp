// What `fiber run --build` sends the engine to build: a tar archive of a folder (honouring its
// .dockerignore) holding a Dockerfile, or, for a program without one, a generated minimal image:
// the executable and the shared libraries it loads, at the paths they have here.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace fiber::cli {

struct build_context {
  std::string tar;         // the archive, deterministic: sorted entries, times and owners zeroed
  std::string dockerfile;  // its path inside the archive
  std::string digest;      // sha256 of the archive, hex: the image's tag ("content-addressed")
  std::size_t files = 0;
};

/// The folder `dir` with its Dockerfile `dockerfile` (relative to dir). fiber::error(config_error)
/// when there is no such Dockerfile.
build_context context_of_folder(const std::filesystem::path& dir, const std::string& dockerfile = "Dockerfile");

/// A minimal image for `program` (a dynamically or statically linked ELF file here): the program,
/// every library `ldd` names for it and the loader, at their paths on this machine, /tmp, and a
/// Dockerfile `FROM scratch` with them. fiber::error(config_error) when `program` is not a file
/// or not a program this machine can run.
build_context context_of_program(const std::filesystem::path& program);

/// `program` as a shell finds it: a name without '/' is looked up in the directories of PATH
/// (the first executable file of that name), a path is taken as it is. fiber::error(config_error)
/// naming PATH when the name is on none of them.
std::filesystem::path program_path(const std::string& program);

/// The .dockerignore rules: `path` (relative, '/'-separated) is left out of the context.
class ignore_rules {
 public:
  explicit ignore_rules(const std::string& text);
  bool excluded(const std::string& path) const;

 private:
  struct rule {
    std::string pattern;
    bool keep;  // "!pattern"
  };
  std::vector<rule> rules_;
};

/// sha256 of `data`, lower-case hex.
std::string sha256_hex(const std::string& data);

}  // namespace fiber::cli
