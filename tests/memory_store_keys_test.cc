// The memory store's keys (src/engine/memory/stored_key.h): bytes kept in the map node up to
// StoredKey::kInline, on the heap beyond. Keys of every length around that boundary, with shared
// prefixes and zero bytes, must read back whole and in bytewise order, forwards and backwards,
// and survive garbage collection, exactly as a std::map of std::string keys holds them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/memory/memory_store.h"
#include "engine/memory/stored_key.h"

namespace kvq {
namespace {

using engine::MemoryStore;
using engine::StoredKey;
using pipeline::StoreWrite;

// Keys from 0 bytes to well past the inline size: a common prefix with a zero byte, then a
// length-dependent tail, so that keys inside and outside the node interleave in the order.
std::vector<std::string> keys_around_the_inline_size() {
  std::vector<std::string> keys;
  for (std::size_t n = 0; n <= 2 * StoredKey::kInline + 3; ++n) {
    std::string k(n, 'k');
    if (n > 2) k[2] = '\0';
    if (n > 0) k.back() = static_cast<char>('a' + n % 7);
    keys.push_back(k);
  }
  keys.emplace_back(10'000, 'z');
  return keys;
}

std::vector<KeyValue> expected_in(const std::map<std::string, std::string>& want) {
  std::vector<KeyValue> out;
  for (const auto& [key, value] : want) out.push_back({key, value});
  return out;
}

TEST(StoredKey, KeepsEveryByteInsideOrOutsideTheNode) {
  for (const std::string& k : keys_around_the_inline_size()) {
    const StoredKey stored(k);
    EXPECT_EQ(stored.view(), k) << "size " << k.size();
    EXPECT_NE(stored.view().data(), k.data());  // a copy
  }
  EXPECT_TRUE(StoredKey::Less{}(StoredKey("ab"), std::string_view("abc")));
  EXPECT_FALSE(StoredKey::Less{}(std::string_view("abc"), StoredKey("ab")));
  EXPECT_TRUE(StoredKey::Less{}(StoredKey(std::string(StoredKey::kInline, 'a')),
                                StoredKey(std::string(StoredKey::kInline + 1, 'a'))));
}

TEST(MemoryStore, KeysOfEveryLengthReadBackWholeAndInOrder) {
  MemoryStore s;
  std::map<std::string, std::string> want;
  std::vector<StoreWrite> writes;
  for (const std::string& k : keys_around_the_inline_size()) {
    writes.push_back({StoreWrite::Kind::kSet, k, "v" + std::to_string(k.size())});
    want[k] = "v" + std::to_string(k.size());
  }
  s.apply(1, writes);
  // Every other key cleared, then garbage-collected: erasing nodes of both kinds.
  writes.clear();
  bool odd = false;
  for (auto it = want.begin(); it != want.end();) {
    odd = !odd;
    if (!odd) {
      ++it;
      continue;
    }
    writes.push_back({StoreWrite::Kind::kClear, it->first, {}});
    it = want.erase(it);
  }
  s.apply(2, writes);
  s.forget_before(2);

  auto snap = s.snapshot();
  EXPECT_EQ(snap->get_range("", "\xff", 0, false), expected_in(want));
  std::vector<KeyValue> backward = expected_in(want);
  std::reverse(backward.begin(), backward.end());
  EXPECT_EQ(snap->get_range("", "\xff", 0, true), backward);
  for (const std::string& k : keys_around_the_inline_size()) {
    EXPECT_EQ(snap->get(k), want.contains(k) ? std::optional(want[k]) : std::nullopt)
        << "size " << k.size();
  }
  EXPECT_EQ(s.key_count(), want.size());
}

}  // namespace
}  // namespace kvq
