// What every backend shares (src/backend/backend.cpp): the words of a failed pidfd_open.
#include <gtest/gtest.h>

#include <cerrno>

#include "backend/backend.hpp"

TEST(backend, a_process_out_of_open_files_is_told_to_raise_its_limit_not_to_change_kernels) {
  auto out_of_files = fiber::detail::pidfd_open_failure(EMFILE);
  EXPECT_NE(out_of_files.find("out of open files"), std::string::npos) << out_of_files;
  EXPECT_NE(out_of_files.find("ulimit -n"), std::string::npos) << out_of_files;
  EXPECT_EQ(out_of_files.find("Linux 5.3"), std::string::npos) << out_of_files;
  auto old_kernel = fiber::detail::pidfd_open_failure(ENOSYS);
  EXPECT_NE(old_kernel.find("Linux 5.3 or newer"), std::string::npos) << old_kernel;
}
