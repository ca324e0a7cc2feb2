// Test helper: what a (plain-text) etcd member says it served, read from its own Prometheus
// counters (GET /metrics on its client port), so tests and measurements can count the requests a
// kvq operation costs without trusting kvq's own accounting.
//
// Example:
//   const std::int64_t before = kvq::testing::etcd_requests_handled(cluster.endpoint(0));
//   db->run(...);
//   std::int64_t requests = kvq::testing::etcd_requests_handled(cluster.endpoint(0)) - before;
#ifndef KVQ_TESTS_SUPPORT_ETCD_METRICS_H_
#define KVQ_TESTS_SUPPORT_ETCD_METRICS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvq::testing {

// The number of KV requests of the given gRPC methods (default: Range and Txn, the two that kvq's
// reads and commits send) that the member at `endpoint` ("127.0.0.1:port", no TLS) has answered
// since it started, whatever their status: the sum of its grpc_server_handled_total counters
// for those methods (0 before the first). Throws std::runtime_error if the member cannot be
// reached or counts no gRPC requests at all.
std::int64_t etcd_requests_handled(const std::string& endpoint,
                                   const std::vector<std::string_view>& methods = {"Range", "Txn"});

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_ETCD_METRICS_H_
