// The resolve phase of a commit batch (src/engine/pipeline/batch_resolver.h): an atomic add reads
// the state that earlier writes of the same batch left (sets, clears, clear-ranges, other adds,
// by the same or earlier transactions of the batch), else the store's; a transaction that
// conflicts leaves nothing behind, not even for the adds after it.
#include "engine/pipeline/batch_resolver.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "engine/memory/memory_store.h"

namespace kvq {
namespace {

using engine::CommitRequest;
using engine::Mutation;
using engine::MutationType;
using pipeline::StoreWrite;

Mutation set(std::string k, std::int64_t v) {
  return {MutationType::kSet, std::move(k), common::encode_le64(v)};
}
Mutation add(std::string k, std::int64_t v) {
  return {MutationType::kAddValue, std::move(k), common::encode_le64(v)};
}

class BatchResolverTest : public ::testing::Test {
 protected:
  BatchResolverTest() {
    store_.apply(10, {{StoreWrite::Kind::kSet, "n", common::encode_le64(100)},
                      {StoreWrite::Kind::kSet, "r", common::encode_le64(7)}});
  }

  // Resolves one batch of transactions (each a list of mutations, read at version 10; the first
  // also with `read_conflicts_of_first`) at the next version, and applies what committed.
  void run(std::vector<std::vector<Mutation>> transactions,
           std::vector<engine::KeyRange> read_conflicts_of_first = {}) {
    std::vector<CommitRequest> requests(transactions.size());
    std::vector<std::unique_ptr<pipeline::Writer>> writers;
    std::vector<pipeline::Writer*> batch;
    for (std::size_t i = 0; i < transactions.size(); ++i) {
      requests[i].read_version = 10;
      requests[i].mutations = std::move(transactions[i]);
      for (const Mutation& m : requests[i].mutations) {
        requests[i].write_conflicts.push_back({m.param1, common::key_after(m.param1)});
      }
      if (i == 0) requests[i].read_conflicts = read_conflicts_of_first;
      writers.push_back(std::make_unique<pipeline::Writer>(&requests[i]));
      batch.push_back(writers.back().get());
    }
    pipeline::BatchResolver resolver(&store_, &checker_);
    pipeline::ResolvedBatch out = resolver.run(batch, ++version_);
    if (out.any_committed) store_.apply(version_, out.writes);
  }
  // The stored value of `key` as an int64 (-1 if absent).
  std::int64_t value(const std::string& key) const {
    std::optional<std::string> v = store_.snapshot()->get(key);
    return v ? common::decode_le64(*v) : -1;
  }

  engine::MemoryStore store_;
  pipeline::ConflictChecker checker_;
  Version version_ = 19;
};

TEST_F(BatchResolverTest, AnAddReadsTheStoreWhenNothingInTheBatchWroteItsKey) {
  run({{set("other", 1), add("n", 5)}, {add("r", 1)}});
  EXPECT_EQ(value("n"), 105);
  EXPECT_EQ(value("r"), 8);
  EXPECT_EQ(value("other"), 1);
}

TEST_F(BatchResolverTest, AnAddReadsWhatEarlierTransactionsOfTheBatchWrote) {
  run({{set("n", 1)}, {add("n", 2)}, {add("n", 3), add("fresh", 4)}, {add("fresh", 5)}});
  EXPECT_EQ(value("n"), 6);
  EXPECT_EQ(value("fresh"), 9);
}

TEST_F(BatchResolverTest, AnAddAfterAClearOrAClearRangeOfTheBatchStartsFromNothing) {
  run({{{MutationType::kClear, "n", ""}}, {add("n", 2)}});
  EXPECT_EQ(value("n"), 2);
  run({{{MutationType::kClearRange, "a", "z"}}, {add("r", 3)}, {add("n", 4)}});
  EXPECT_EQ(value("r"), 3);
  EXPECT_EQ(value("n"), 4);
}

TEST_F(BatchResolverTest, AConflictingTransactionLeavesNothingForTheAddsAfterIt) {
  run({{set("n", 1)}});  // committed at 20, after the read version 10 of the next batch
  run({{set("n", 50)}, {add("n", 2)}}, {{"n", common::key_after("n")}});
  EXPECT_EQ(value("n"), 3) << "the first transaction read n and conflicted";
}

}  // namespace
}  // namespace kvq
