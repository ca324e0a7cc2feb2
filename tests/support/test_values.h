// Test support: small helpers the layer tests share (values, percentiles; the history's clock is
// history::now_ns in tools/kvq/history.h).
#ifndef KVQ_TESTS_SUPPORT_TEST_VALUES_H_
#define KVQ_TESTS_SUPPORT_TEST_VALUES_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kvq::testing {

// "v<from>", "v<from + 1>", ... (n values).
inline std::vector<std::string> numbered(int from, int n) {
  std::vector<std::string> out;
  for (int i = from; i < from + n; ++i) out.push_back("v" + std::to_string(i));
  return out;
}

// The q-quantile (0..1) of `v` (non-empty), nearest rank below.
inline double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_TEST_VALUES_H_
