// Fuzz-style tests of Tuple::unpack: random and mutated byte strings must either decode to a tuple
// that packs back to exactly the same bytes, or throw kvq::Error(invalid_tuple). Never anything
// else (run under -DKVQ_SANITIZE=address,undefined to catch out-of-bounds reads and UB).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kvq/tuple.h"
#include "support/random_tuple.h"

namespace kvq {
namespace {

int CountIncomplete(const Tuple& t) {
  int n = 0;
  for (const TupleElement& e : t.elements()) {
    if (const auto* v = std::get_if<Versionstamp>(&e)) n += v->is_complete() ? 0 : 1;
    if (const auto* nested = std::get_if<Tuple>(&e)) n += CountIncomplete(*nested);
  }
  return n;
}

struct Outcome {
  int accepted = 0;
  int rejected = 0;
};

// Feeds `bytes` to unpack. Accepted input must be canonical: packing the result gives the input.
void Check(const std::string& bytes, Outcome& outcome) {
  Tuple t;
  try {
    t = Tuple::unpack(bytes);
  } catch (const Error& e) {
    ASSERT_EQ(e.code(), ErrorCode::kInvalidTuple) << e.what();
    ASSERT_NE(std::string(e.what()).find("at offset"), std::string::npos) << e.what();
    ++outcome.rejected;
    return;
  }
  ++outcome.accepted;
  (void)t.to_string();  // must not crash either
  const int incomplete = CountIncomplete(t);
  if (incomplete == 0) {
    ASSERT_EQ(t.pack(), bytes) << t.to_string();
  } else if (incomplete == 1) {
    const std::string with_offset = t.pack_with_versionstamp();
    ASSERT_EQ(with_offset.substr(0, with_offset.size() - 4), bytes) << t.to_string();
  }
  ASSERT_EQ(Tuple::unpack(bytes), t);
}

TEST(TupleFuzz, RandomBytesDecodeCanonicallyOrThrowInvalidTuple) {
  testing::RandomTuples gen(7);
  // Type codes (valid and not) and the escape bytes, so random strings often get deep.
  static constexpr std::uint8_t kAlphabet[] = {0x00, 0xff, 0x01, 0x02, 0x05, 0x0b, 0x0c, 0x13,
                                               0x14, 0x15, 0x1c, 0x1d, 0x20, 0x21, 0x26, 0x27,
                                               0x30, 0x33, 0x80, 0xc3, 0xed, 0xf4, 0x09, 0xf6};
  Outcome outcome;
  for (int i = 0; i < 200000; ++i) {
    std::string s;
    const std::uint64_t n = gen.Uniform(24);
    const bool biased = gen.Uniform(4) != 0;
    for (std::uint64_t k = 0; k < n; ++k) {
      s.push_back(static_cast<char>(biased ? kAlphabet[gen.Uniform(std::size(kAlphabet))]
                                           : gen.Uniform(256)));
    }
    Check(s, outcome);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(outcome.accepted, 1000);
  EXPECT_GT(outcome.rejected, 1000);
}

TEST(TupleFuzz, MutatedValidEncodingsDecodeCanonicallyOrThrowInvalidTuple) {
  testing::RandomTuples gen(99);
  Outcome outcome;
  for (int i = 0; i < 40000; ++i) {
    std::string s = gen.Make(3, 5).pack();
    const std::uint64_t mutations = 1 + gen.Uniform(3);
    for (std::uint64_t m = 0; m < mutations; ++m) {
      const std::size_t pos = s.empty() ? 0 : gen.Uniform(s.size());
      switch (gen.Uniform(6)) {
        case 0:  // truncate
          s.resize(pos);
          break;
        case 1:  // flip bits of one byte
          if (!s.empty())
            s[pos] = static_cast<char>(s[pos] ^ static_cast<char>(1 + gen.Uniform(255)));
          break;
        case 2:  // insert a byte
          s.insert(pos, 1, static_cast<char>(gen.Uniform(256)));
          break;
        case 3:  // delete a byte
          if (!s.empty()) s.erase(pos, 1);
          break;
        case 4:  // set a byte to an escape byte
          if (!s.empty()) s[pos] = gen.Uniform(2) ? '\0' : '\xff';
          break;
        default:  // splice in another encoding
          s.insert(pos, gen.Make(1, 2).pack());
          break;
      }
    }
    Check(s, outcome);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(outcome.accepted, 100);
  EXPECT_GT(outcome.rejected, 1000);
}

TEST(TupleFuzz, EveryPrefixOfAValidEncodingDecodesOrThrows) {
  testing::RandomTuples gen(5);
  Outcome outcome;
  for (int i = 0; i < 2000; ++i) {
    const std::string s = gen.Make(3, 6).pack();
    for (std::size_t len = 0; len <= s.size(); ++len) {
      // A separate allocation of exactly `len` bytes, so ASan sees any read past the end.
      const std::string prefix(s.data(), len);
      Check(prefix, outcome);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(outcome.rejected, 1000);
}

}  // namespace
}  // namespace kvq
