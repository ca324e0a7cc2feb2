// kvq::open URL handling.
#include <gtest/gtest.h>

#include <string>

#include "kvq/database.h"
#include "support/engines.h"

namespace kvq {
namespace {

using testing::open_error;

TEST(Open, MemoryUrlOpensAnEmptyDatabase) {
  auto db = open("memory:");
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->url(), "memory:");
  EXPECT_EQ(db->run([](Transaction& tr) { return tr.get_range("", "\xff"); }).size(), 0u);
}

TEST(Open, EachMemoryDatabaseIsSeparate) {
  auto a = open("memory:");
  auto b = open("memory:");
  a->run([](Transaction& tr) { tr.set("k", "v"); });
  EXPECT_EQ(b->run([](Transaction& tr) { return tr.get("k"); }), std::nullopt);
}

TEST(Open, MemoryAcceptsTheMvccWindowOption) {
  EXPECT_NO_THROW(open("memory:?mvcc_window_ms=250"));
}

TEST(Open, TheLongestMvccWindowKeepsAnOpenTransactionReadable) {
  auto db = open("memory:?mvcc_window_ms=2147483647");
  Transaction reader = db->create_transaction();
  EXPECT_EQ(reader.get("k"), std::nullopt);
  db->run([](Transaction& tr) { tr.set("k", "v"); });
  db->run([](Transaction& tr) { tr.set("k", "w"); });
  EXPECT_EQ(reader.get("k"), std::nullopt);
}

TEST(Open, MvccWindowAboveIntMaxMillisecondsIsConnectionStringInvalid) {
  // 9223372036854775807 ms overflowed when converted to versions (microseconds).
  EXPECT_EQ(open_error("memory:?mvcc_window_ms=9223372036854775807"),
            ErrorCode::kConnectionStringInvalid);
  EXPECT_EQ(open_error("memory:?mvcc_window_ms=2147483648"), ErrorCode::kConnectionStringInvalid);
}

TEST(Open, MalformedOrUnknownUrlsAreConnectionStringInvalid) {
  for (const char* url :
       {"", "memory", ":memory", "bogus:", "MEMORY:", "memory:/path", "memory:?mvcc_window_ms=abc",
        "memory:?mvcc_window_ms=0", "memory:?mvcc_window_ms=-5", "memory:?unknown=1", "memory:?=1",
        "memory:?mvcc_window_ms", "memory:?mvcc_window_ms=1&mvcc_window_ms=2",
        "memory:?mvcc_window_ms=1&", "rocksdb:", "etcd:", "etcd://", "etcd:host:1"}) {
    EXPECT_EQ(open_error(url), ErrorCode::kConnectionStringInvalid) << url;
  }
}

#ifndef KVQ_WITH_ROCKSDB
TEST(Open, RocksDbWithoutTheEngineIsConnectionStringInvalid) {
  EXPECT_EQ(open_error("rocksdb:/tmp/x"), ErrorCode::kConnectionStringInvalid);
}
#endif
#ifndef KVQ_WITH_ETCD
TEST(Open, EtcdWithoutTheEngineIsConnectionStringInvalid) {
  EXPECT_EQ(open_error("etcd://127.0.0.1:2379"), ErrorCode::kConnectionStringInvalid);
}
#endif

}  // namespace
}  // namespace kvq
