// A gtest fixture for FairQueue tests, parameterised by engine (support/layer_engines.h), with
// helpers both fair queue test files use.
#ifndef KVQ_TESTS_SUPPORT_FAIR_FIXTURE_H_
#define KVQ_TESTS_SUPPORT_FAIR_FIXTURE_H_

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kvq/kvq.h"
#include "support/layer_engines.h"

namespace kvq::testing {

inline std::vector<std::string> fair_engine_names() {
  std::vector<std::string> out;
  for (const auto& e : layer_engines()) out.push_back(e.name);
  return out;
}

class FairTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    for (const auto& e : layer_engines()) {
      if (e.name != GetParam()) continue;
      std::string skip;
      db_ = e.open(&skip);
      if (!db_) GTEST_SKIP() << skip;
    }
    ASSERT_TRUE(db_);
    std::random_device rd;
    space_ = Subspace(Tuple().append("fair").append(static_cast<std::int64_t>(rd() & 0xffffff)));
  }
  bool on_etcd() const { return GetParam() == "etcd"; }
  FairQueue make(FairQueueOptions o = {}) { return FairQueue(db_, space_, o); }
  // Pushes `n` items "<tenant>-<i>" to `tenant` in batches that fit every engine.
  void push_many(FairQueue& fq, const std::string& tenant, int n) {
    const int chunk = on_etcd() ? 50 : 1000;
    for (int i = 0; i < n; i += chunk) {
      std::vector<std::string> values;
      for (int j = i; j < std::min(n, i + chunk); ++j)
        values.push_back(tenant + "-" + std::to_string(j));
      fq.push_batch(tenant, values);
    }
  }

  std::shared_ptr<Database> db_;
  Subspace space_;
};

// The index in "<tenant>-<index>".
inline int item_index(const std::string& value) {
  return std::stoi(value.substr(value.rfind('-') + 1));
}

}  // namespace kvq::testing

#define KVQ_FAIR_ENGINES(suite)                                                      \
  INSTANTIATE_TEST_SUITE_P(Engines, suite,                                           \
                           ::testing::ValuesIn(::kvq::testing::fair_engine_names()), \
                           [](const auto& info) { return info.param; })

#endif  // KVQ_TESTS_SUPPORT_FAIR_FIXTURE_H_
