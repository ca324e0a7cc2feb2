// The fairness checks of tools/kvq/history.h that the simulation's fairness probe and the fair
// queue tests rely on: round_robin_break and weighted_round_break, on sequences that keep and
// that break (weighted) round-robin.
#include "tools/kvq/history.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvq {
namespace {

// "abca" -> {"a", "b", "c", "a"}: one tenant a letter.
std::vector<std::string> turns(const std::string& letters) {
  std::vector<std::string> out;
  for (char c : letters) out.emplace_back(1, c);
  return out;
}

std::string weighted(const std::string& letters, const std::map<std::string, std::int64_t>& w) {
  return history::weighted_round_break(turns(letters), [&](const std::string& t) {
    const auto it = w.find(t);
    return it == w.end() ? std::int64_t{1} : it->second;
  });
}

TEST(RoundRobinBreak, AcceptsRotationAndATenantLeftAlone) {
  for (const char* ok : {"", "a", "abcabc", "abcab", "ababbb", "abcacc"}) {
    EXPECT_EQ(history::round_robin_break(turns(ok)), "") << ok;
  }
}

TEST(RoundRobinBreak, NamesATenantServedTwiceWhileAnotherWaited) {
  EXPECT_NE(history::round_robin_break(turns("aab")), "");
  EXPECT_NE(history::round_robin_break(turns("abacb")), "");
}

TEST(WeightedRoundBreak, AcceptsRunsOfEachWeight) {
  const std::map<std::string, std::int64_t> w{{"a", 3}, {"b", 1}, {"c", 2}};
  for (const char* ok : {"aaabccaaabcc", "aaabccab", "aaabccaaaaaa", "abcc", "aaabcca", ""}) {
    EXPECT_EQ(weighted(ok, w), "") << ok;
  }
}

TEST(WeightedRoundBreak, NamesARunOfTheWrongLength) {
  const std::map<std::string, std::int64_t> w{{"a", 3}, {"b", 1}, {"c", 2}};
  // A run shorter than its weight while the tenant comes back later.
  EXPECT_NE(weighted("aabccaaab", w), "");
  // A run longer than its weight while others come after it.
  EXPECT_NE(weighted("aaaabcc", w), "");
  EXPECT_NE(weighted("aaabbcc", w), "");
  // Runs of the right length out of turn: b twice while c waited.
  EXPECT_NE(weighted("aaabaaabcc", w), "");
}

TEST(WeightedRoundBreak, WithEveryWeightOneIsRoundRobinBreak) {
  for (const char* s : {"abcabc", "aab", "abacb", "abab", "aabb", "abcacc"}) {
    EXPECT_EQ(weighted(s, {}).empty(), history::round_robin_break(turns(s)).empty()) << s;
  }
}

}  // namespace
}  // namespace kvq
