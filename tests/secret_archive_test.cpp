// The archive that places a container's credentials (backend/docker/secret_archive): a tar that
// tar itself reads, a folder only its owner enters and a file only its owner reads.
#include "backend/docker/secret_archive.hpp"

#include "backend/command.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>
#include <filesystem>
#include <fstream>
#include <string>

#include "run_folder.hpp"

namespace fs = std::filesystem;

namespace {
std::string output_of(const std::vector<std::string>& argv) { return fiber::detail::run_command(argv).out; }
}  // namespace

TEST(secret_archive, tar_lists_a_private_folder_and_file_and_extracts_the_text) {
  auto dir = fiber_test::run_folder() / ("secret_archive_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string text = "curve,AAAA,BBBB,CCCC";
  std::ofstream(dir / "a.tar", std::ios::binary) << fiber::detail::secret_archive(text, 1234, 5678);
  auto listing = output_of({"tar", "-tvf", (dir / "a.tar").string()});
  EXPECT_NE(listing.find("drwx------"), std::string::npos) << listing;
  EXPECT_NE(listing.find("-r-------- "), std::string::npos) << listing;
  EXPECT_NE(listing.find(".fiber-keys/keys"), std::string::npos) << listing;
  EXPECT_NE(output_of({"tar", "--numeric-owner", "-tvf", (dir / "a.tar").string()}).find("1234/5678"), std::string::npos);
  EXPECT_EQ(output_of({"tar", "-xOf", (dir / "a.tar").string(), ".fiber-keys/keys"}), text);
  fs::remove_all(dir);
}
