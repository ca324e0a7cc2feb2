// Test support: URLs of fresh databases with injected faults (docs/engines.md, "Fault
// injection"), one per engine built here.
#ifndef KVQ_TESTS_SUPPORT_FAULT_URLS_H_
#define KVQ_TESTS_SUPPORT_FAULT_URLS_H_

#include <string>
#include <vector>

namespace kvq::testing {

// "memory:?query", "rocksdb:<fresh dir>/db?query" and a fresh prefix of the shared etcd with
// `query` (each when built and, for etcd, when an etcd binary is installed).
std::vector<std::string> faulty_urls(const std::string& query);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_FAULT_URLS_H_
