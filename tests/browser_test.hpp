// What the browser tests share: Chromium (tests/chromium.hpp) is a test tool, not an engine, and
// scripts/test.sh installs it; where tests must not skip (CI), its absence fails the test.
#pragma once
#include <gtest/gtest.h>

#include "chromium.hpp"
#include "support.hpp"

#define FIBER_TEST_NEEDS_CHROMIUM()                                                                         \
  do {                                                                                                      \
    if (::fiber_test::chromium_path().empty()) {                                                            \
      if (::fiber_test::engines_required()) FAIL() << "no Chromium (/usr/bin/chromium): scripts/test.sh installs Debian's chromium"; \
      GTEST_SKIP() << "no Chromium here (/usr/bin/chromium); install Debian's chromium to run the page's tests"; \
    }                                                                                                       \
  } while (0)
