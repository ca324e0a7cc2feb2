// A gtest fixture for layer tests parameterised by (engine, high-contention mode).
#ifndef KVQ_TESTS_SUPPORT_LAYER_FIXTURE_H_
#define KVQ_TESTS_SUPPORT_LAYER_FIXTURE_H_

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>

#include "kvq/kvq.h"
#include "support/layer_engines.h"

namespace kvq::testing {

struct LayerParam {
  std::string engine;
  bool high_contention;
};

inline std::vector<LayerParam> layer_params() {
  std::vector<LayerParam> out;
  for (const auto& e : layer_engines()) {
    out.push_back({e.name, false});
    out.push_back({e.name, true});
  }
  return out;
}

inline std::string layer_param_name(const ::testing::TestParamInfo<LayerParam>& info) {
  return info.param.engine + (info.param.high_contention ? "_HighContention" : "_Plain");
}

class LayerTest : public ::testing::TestWithParam<LayerParam> {
 protected:
  void SetUp() override {
    for (const auto& e : layer_engines()) {
      if (e.name != GetParam().engine) continue;
      std::string skip;
      db_ = e.open(&skip);
      if (!db_) GTEST_SKIP() << skip;
    }
    ASSERT_TRUE(db_);
    std::random_device rd;
    space_ = Subspace(Tuple().append("test").append(static_cast<std::int64_t>(rd() & 0xffffff)));
  }
  bool hc() const { return GetParam().high_contention; }

  std::shared_ptr<Database> db_;
  Subspace space_;
};

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_LAYER_FIXTURE_H_
