// The fuzz corpora replayed on every build: tests/fuzz/corpus (grown by decode_fuzz) and
// tests/fuzz/peer_corpus (grown by peer_bytes_fuzz). Each input parses, or fails with
// malformed_message and nothing else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz/decode_target.hpp"
#include "fuzz/peer_bytes_target.hpp"

namespace {
/// Feeds every input of `corpus` to `parse`: each parses, or fails with malformed_message.
template <class Parse>
void replay(const char* corpus, Parse parse) {
  std::size_t inputs = 0, malformed = 0;
  for (auto& entry : std::filesystem::directory_iterator(corpus)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++inputs;
    try {
      parse(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    } catch (const fiber::error& e) {
      EXPECT_EQ(e.code(), fiber::errc::malformed_message) << entry.path() << ": " << e.what();
      ++malformed;
    } catch (const std::exception& e) {
      ADD_FAILURE() << entry.path() << " raised " << typeid(e).name() << ": " << e.what();
    }
  }
  EXPECT_GT(inputs, 100u);     // the corpus is there
  EXPECT_GT(malformed, 0u);    // and it holds junk as well as values
  EXPECT_LT(malformed, inputs);
}
}  // namespace

TEST(fuzz_corpus, every_input_decodes_or_is_malformed) { replay(FIBER_FUZZ_CORPUS, &fiber_fuzz::decode_one); }

TEST(fuzz_corpus, every_peer_input_parses_or_is_malformed) { replay(FIBER_PEER_CORPUS, &fiber_fuzz::peer_bytes_one); }

// The finding that started the corpus: a bool from a byte that is neither 0 nor 1.
TEST(fuzz_corpus, a_bool_from_a_byte_above_one_is_malformed) {
  const std::uint8_t input[] = {0, 0, 7, 7};  // pick bool, no frames, head {7}
  try {
    fiber_fuzz::decode_one(input, sizeof input);
    ADD_FAILURE() << "decoded a bool from 7";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::malformed_message);
  }
}

