// What `fiber run --build` sends the engine (src/cli/build_context) and the credentials it pushes
// with (src/cli/registry_auth): unit tests, no engine.
#include "cli/build_context.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "cli/registry_auth.hpp"
#include "cli/run_options.hpp"
#include "fiber/error.hpp"

#include "run_folder.hpp"

namespace fs = std::filesystem;
using namespace fiber::cli;

namespace {
struct temp_dir {
  fs::path path = fiber_test::run_folder() / ("fiber-ctx-" + std::to_string(::getpid()) + "-" + std::to_string(++count));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel) << text;
  }
  static inline int count = 0;
};

std::set<std::string> entries(const std::string& tar) {
  std::set<std::string> out;
  auto* a = archive_read_new();
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_memory(a, tar.data(), tar.size()), ARCHIVE_OK);
  archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) out.insert(archive_entry_pathname(e));
  archive_read_free(a);
  return out;
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const fiber::error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(build_context, dockerignore_rules_follow_dockers) {
  ignore_rules r("# comment\n*.o\nbuild\n!build/keep.txt\ndocs/*.md\n**/secret\n");
  EXPECT_TRUE(r.excluded("main.o"));
  EXPECT_FALSE(r.excluded("src/main.o")) << "a single * does not cross folders";
  EXPECT_TRUE(r.excluded("build/x/y.txt")) << "a folder's rule covers what it holds";
  EXPECT_FALSE(r.excluded("build/keep.txt")) << "the last matching rule decides";
  EXPECT_TRUE(r.excluded("docs/a.md"));
  EXPECT_FALSE(r.excluded("docs/sub/a.md"));
  EXPECT_TRUE(r.excluded("a/b/secret"));
  EXPECT_FALSE(r.excluded("main.cpp"));
}

TEST(build_context, a_folder_is_archived_without_what_dockerignore_names_and_the_same_content_gives_the_same_tag) {
  temp_dir d;
  d.write("Dockerfile", "FROM scratch\nCOPY . /\n");
  d.write(".dockerignore", "build\n*.log\n");
  d.write("src/main.cpp", "int main() {}\n");
  d.write("build/big.bin", "xxxx");
  d.write("run.log", "noise");
  auto a = context_of_folder(d.path);
  auto names = entries(a.tar);
  EXPECT_TRUE(names.count("Dockerfile"));
  EXPECT_TRUE(names.count("src/main.cpp"));
  EXPECT_FALSE(names.count("build/big.bin"));
  EXPECT_FALSE(names.count("build"));
  EXPECT_FALSE(names.count("run.log"));
  EXPECT_EQ(a.dockerfile, "Dockerfile");
  EXPECT_EQ(a.digest.size(), 64u);
  fs::last_write_time(d.path / "src/main.cpp", fs::file_time_type::clock::now() - std::chrono::hours(5));
  EXPECT_EQ(context_of_folder(d.path).digest, a.digest) << "times do not change the tag";
  d.write("src/main.cpp", "int main() { return 1; }\n");
  EXPECT_NE(context_of_folder(d.path).digest, a.digest) << "content does";
}

TEST(build_context, a_folder_without_its_dockerfile_is_an_error_that_says_what_to_do) {
  temp_dir d;
  auto why = error_of([&] { context_of_folder(d.path); });
  EXPECT_NE(why.find("no Dockerfile in"), std::string::npos) << why;
  EXPECT_NE(why.find("--image"), std::string::npos) << why;
}

TEST(build_context, a_program_gets_an_image_of_itself_its_libraries_and_the_loader) {
  auto exe = fs::canonical("/proc/self/exe");
  auto c = context_of_program(exe);
  auto names = entries(c.tar);
  EXPECT_TRUE(names.count("Dockerfile"));
  EXPECT_TRUE(names.count("rootfs" + exe.string()));
  bool libc = false, loader = false;
  for (auto& n : names) {
    libc = libc || n.find("/libc.so.6") != std::string::npos;
    loader = loader || n.find("/ld-linux") != std::string::npos;
  }
  EXPECT_TRUE(libc && loader);
  // libcurl is loaded by a master when it first calls an engine's API, not linked: the image holds
  // it and its libraries all the same.
  bool curl = false, curls_own = false;
  for (auto& n : names) {
    curl = curl || n.find("/libcurl.so") != std::string::npos;
    curls_own = curls_own || n.find("/libnghttp2.so") != std::string::npos;  // Debian's libcurl links it
  }
  EXPECT_TRUE(curl && curls_own);
  EXPECT_TRUE(names.count("rootfs/tmp/") || names.count("rootfs/tmp")) << "a /tmp for the program";
}

TEST(build_context, a_script_or_a_missing_program_cannot_become_an_image) {
  temp_dir d;
  d.write("run.sh", "#!/bin/sh\necho hi\n");
  fs::permissions(d.path / "run.sh", fs::perms::owner_all);
  auto why = error_of([&] { context_of_program(d.path / "run.sh"); });
  EXPECT_NE(why.find("is not a compiled program"), std::string::npos) << why;
  why = error_of([&] { context_of_program(d.path / "nothing"); });
  EXPECT_NE(why.find("is not a file here"), std::string::npos) << why;
}

TEST(build_context, a_program_named_without_a_path_is_found_on_path_as_a_shell_finds_it) {
  temp_dir d;
  fs::create_directories(d.path / "bin");
  fs::copy_file("/proc/self/exe", d.path / "bin" / "my-tool");
  d.write("bin/not-executable", "x");
  fs::permissions(d.path / "bin" / "not-executable", fs::perms::owner_read);
  const char* saved = std::getenv("PATH");
  std::string old = saved ? saved : "";
  ::setenv("PATH", (d.path.string() + "/nowhere:" + (d.path / "bin").string() + ":/usr/bin").c_str(), 1);
  EXPECT_EQ(program_path("my-tool"), d.path / "bin" / "my-tool");
  EXPECT_EQ(program_path("sh"), fs::path("/usr/bin/sh"));
  EXPECT_EQ(program_path("./my-tool"), fs::path("./my-tool")) << "a path is taken as it is";
  auto why = error_of([&] { program_path("not-executable"); });
  EXPECT_NE(why.find("program not-executable is not on PATH"), std::string::npos) << why;
  why = error_of([&] { program_path("no-such-tool-anywhere"); });
  EXPECT_NE(why.find("is not on PATH (" + d.path.string() + "/nowhere:"), std::string::npos) << why;
  ::setenv("PATH", old.c_str(), 1);
}

TEST(registry_auth, credentials_come_from_docker_config_json) {
  temp_dir d;
  d.write("config.json", R"({"auths": {"reg.example:5000": {"auth": ")" + base64_encode("alice:s3cret") +
                             R"("}, "https://other.example/v1/": {"username": "bob", "password": "pw"}}})");
  ::setenv("DOCKER_CONFIG", d.path.c_str(), 1);
  auto a = credentials_for("reg.example:5000");
  EXPECT_EQ(a.username, "alice");
  EXPECT_EQ(a.password, "s3cret");
  EXPECT_EQ(credentials_for("other.example").username, "bob");
  EXPECT_TRUE(credentials_for("unknown.example").username.empty());
  auto header = registry_auth_header(a, "reg.example:5000");
  EXPECT_EQ(header.find_first_of("+/"), std::string::npos) << "base64url";
  for (auto& ch : header) ch = ch == '-' ? '+' : ch == '_' ? '/' : ch;
  auto json = base64_decode(header);
  EXPECT_NE(json.find(R"("username":"alice")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("serveraddress":"reg.example:5000")"), std::string::npos) << json;
  EXPECT_EQ(registry_auth_header({}, "x"), "e30");
  d.write("config.json", "{not json");
  auto why = error_of([&] { credentials_for("reg.example:5000"); });
  EXPECT_NE(why.find("is not valid JSON"), std::string::npos) << why;
  ::unsetenv("DOCKER_CONFIG");
}

TEST(run_options, sizes_take_units_and_refuse_junk) {
  EXPECT_EQ(parse_size("512M", "--memory"), 512LL << 20);
  EXPECT_EQ(parse_size("2G", "--memory"), 2LL << 30);
  EXPECT_EQ(parse_size("1.5Gi", "--memory"), 3LL << 29);
  EXPECT_EQ(parse_size("1000", "--memory"), 1000);
  auto why = error_of([] { parse_size("lots", "--memory"); });
  EXPECT_NE(why.find("--memory lots is not a size"), std::string::npos) << why;
  EXPECT_NE(error_of([] { parse_size("5X", "--memory"); }), "no error");
}
