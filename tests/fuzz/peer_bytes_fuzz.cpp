// libFuzzer target for the parsers of a peer's frames (build with FIBER_FUZZ=ON and clang; see
// docs/testing.md, "Fuzzing"). An exception other than malformed_message, a crash or a sanitizer
// report is a finding.
#include "peer_bytes_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    fiber_fuzz::peer_bytes_one(data, size);
  } catch (const fiber::error& e) {
    if (e.code() != fiber::errc::malformed_message) throw;
  }
  return 0;
}
