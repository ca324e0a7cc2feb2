// Internal (etcd engine): what a failed etcd RPC means, and the kvq::Error it becomes.
//
// Example:
//   grpc::Status s = stub->Range(&ctx, request, &response);
//   if (is_transport_error(s)) { /* try another member */ }
//   if (!s.ok()) throw_rpc_error(s, "get", /*commit=*/false);
#ifndef KVQ_SRC_ENGINE_ETCD_RPC_ERRORS_H_
#define KVQ_SRC_ENGINE_ETCD_RPC_ERRORS_H_

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

namespace kvq::engine::etcd {

// True for UNAVAILABLE and DEADLINE_EXCEEDED (the member could not be reached or did not answer
// in time), and for a call whose connection broke under it (INTERNAL "RST_STREAM", UNKNOWN
// "Stream removed"): another member may answer.
bool is_transport_error(const grpc::Status& status);

// True if the RPC certainly never reached a server (no connection could be made), so a commit
// may be sent again elsewhere without risk of applying it twice.
bool never_sent(const grpc::Status& status);

// True if etcd refused the call for its token ("invalid auth token", "user name is empty",
// "revision of auth store is old"): renewing the token and sending it again may succeed. etcd
// checks the token before it proposes anything, so a refused commit was not applied.
bool token_refused(const grpc::Status& status);

// True if Auth.Authenticate failed only because the cluster has authentication off.
bool auth_not_enabled(const grpc::Status& status);

// True if etcd answered NOSPACE ("database space exceeded"). For a commit this does not say
// whether it was applied: etcd refuses a Txn with NOSPACE before proposing it (its size check, or
// the NOSPACE alarm already raised), but also after applying one that found the backend over its
// quota (etcd's quotaApplierV3: the Txn is applied, then NOSPACE is returned and the alarm
// raised).
bool out_of_space(const grpc::Status& status);

// "gRPC code N: message", for error messages.
std::string describe(const grpc::Status& status);

// Throws the kvq::Error for the failed RPC `status` of operation `what` ("commit", "get", ...):
// transaction_too_old (compacted revision), database_full (NOSPACE; commit_unknown_result for
// a `commit`, which NOSPACE may follow: see out_of_space), process_behind (etcd's "too many
// requests": its apply lags its log; refused before proposing), transaction_too_large
// (--max-txn-ops / --max-request-bytes), authentication_failed (wrong user or password, no
// credentials for a cluster that requires them, a token refused after renewal),
// permission_denied (the user's roles do not cover the keys), commit_unknown_result (transport
// error while `commit`), connection_failed (other transport errors), internal_error (kvq sent an
// invalid Txn), commit_unknown_result for a `commit` that ended INTERNAL or UNKNOWN (how gRPC ends
// a call whose connection broke, which may follow its apply), else unknown_error. The message names
// etcd's words and the URL option to change where there is one.
[[noreturn]] void throw_rpc_error(const grpc::Status& status, std::string_view what, bool commit);

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_RPC_ERRORS_H_
