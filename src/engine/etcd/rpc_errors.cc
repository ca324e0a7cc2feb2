#include "engine/etcd/rpc_errors.h"

#include <optional>

#include "kvq/error.h"

namespace kvq::engine::etcd {
namespace {

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// The kvq::Error for a refusal of etcd's Auth; nullopt for other failures.
std::optional<Error> auth_refusal(const grpc::Status& s, const std::string& where) {
  const std::string& m = s.error_message();
  if (contains(m, "authentication failed")) {
    return Error(ErrorCode::kAuthenticationFailed,
                 where + "the cluster refused the user name or password (" + describe(s) + ")");
  }
  if (contains(m, "user name is empty")) {
    return Error(ErrorCode::kAuthenticationFailed,
                 where +
                     "the cluster requires authentication: give a user and password "
                     "(etcds://user:password@host:port, or user= and password_file=) (" +
                     describe(s) + ")");
  }
  if (token_refused(s)) {
    return Error(
        ErrorCode::kAuthenticationFailed,
        where + "the cluster refused the auth token even after renewing it (" + describe(s) + ")");
  }
  if (contains(m, "permission denied")) {
    return Error(ErrorCode::kPermissionDenied,
                 where +
                     "the etcd user may not read or write these keys (grant it a role with "
                     "readwrite permission on the URL's prefix=) (" +
                     describe(s) + ")");
  }
  return std::nullopt;
}

// The kvq::Error for server-side refusals that do not depend on whether the RPC was a commit;
// nullopt for other failures.
std::optional<Error> refusal(const grpc::Status& s, const std::string& where) {
  const std::string& m = s.error_message();
  if (contains(m, "compacted")) {
    return Error(ErrorCode::kTransactionTooOld,
                 where + "read revision was compacted away (" + describe(s) + ")");
  }
  if (out_of_space(s)) {
    return Error(ErrorCode::kDatabaseFull,
                 where +
                     "the cluster refuses writes: database space exceeded (raise "
                     "--quota-backend-bytes, compact and defragment, then disarm the NOSPACE "
                     "alarm) (" +
                     describe(s) + ")");
  }
  if (contains(m, "too many operations in txn request")) {
    return Error(ErrorCode::kTransactionTooLarge,
                 where +
                     "more compares or operations than the cluster's --max-txn-ops (tell kvq "
                     "the server's value with the URL option max_txn_ops=) (" +
                     describe(s) + ")");
  }
  if (contains(m, "too many requests")) {
    // etcd refuses a proposal while its applied index lags the committed one by over 5,000
    // entries: before proposing, so nothing was applied.
    return Error(ErrorCode::kProcessBehind,
                 where + "the cluster is behind applying its log and refused the request; retry (" +
                     describe(s) + ")");
  }
  if (contains(m, "request is too large") || contains(m, "larger than max") ||
      s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    return Error(ErrorCode::kTransactionTooLarge,
                 where +
                     "request larger than the cluster's --max-request-bytes (tell kvq the "
                     "server's value with the URL option max_request_bytes=) (" +
                     describe(s) + ")");
  }
  if (std::optional<Error> e = auth_refusal(s, where)) return e;
  if (contains(m, "duplicate key given in txn request")) {
    return Error(ErrorCode::kInternalError,
                 where + "kvq sent an invalid Txn (" + describe(s) + ")");
  }
  return std::nullopt;
}

}  // namespace

bool is_transport_error(const grpc::Status& status) {
  const grpc::StatusCode code = status.error_code();
  if (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return true;
  }
  // How gRPC ends a call whose connection broke under it (a member killed or restarted).
  const std::string& m = status.error_message();
  return (code == grpc::StatusCode::INTERNAL && contains(m, "RST_STREAM")) ||
         (code == grpc::StatusCode::UNKNOWN && contains(m, "Stream removed"));
}

bool never_sent(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  const std::string& m = status.error_message();
  return contains(m, "failed to connect") || contains(m, "Connection refused") ||
         contains(m, "connections to all backends failing");
}

bool token_refused(const grpc::Status& status) {
  const std::string& m = status.error_message();
  return contains(m, "invalid auth token") || contains(m, "user name is empty") ||
         contains(m, "revision of auth store is old");
}

bool auth_not_enabled(const grpc::Status& status) {
  return contains(status.error_message(), "authentication is not enabled");
}

bool out_of_space(const grpc::Status& status) {
  const std::string& m = status.error_message();
  return contains(m, "database space exceeded") || contains(m, "NOSPACE");
}

std::string describe(const grpc::Status& status) {
  return "gRPC code " + std::to_string(static_cast<int>(status.error_code())) + ": " +
         status.error_message();
}

void throw_rpc_error(const grpc::Status& status, std::string_view what, bool commit) {
  const std::string where = "etcd " + std::string(what) + ": ";
  if (commit && out_of_space(status)) {
    throw Error(ErrorCode::kCommitUnknownResult,
                where +
                    "the cluster is out of space (NOSPACE), which etcd also answers to a commit "
                    "it applied as the backend crossed its quota: it may or may not have been "
                    "applied (" +
                    describe(status) + ")");
  }
  if (std::optional<Error> e = refusal(status, where)) throw *e;
  if (is_transport_error(status)) {
    if (commit) {
      throw Error(ErrorCode::kCommitUnknownResult,
                  where + "lost contact during commit; it may or may not have been applied (" +
                      describe(status) + ")");
    }
    throw Error(ErrorCode::kConnectionFailed,
                where + "no endpoint answered (" + describe(status) + ")");
  }
  if (commit && (status.error_code() == grpc::StatusCode::INTERNAL ||
                 status.error_code() == grpc::StatusCode::UNKNOWN)) {
    // gRPC ends a call whose connection broke with INTERNAL "RST_STREAM" or UNKNOWN "Stream
    // removed": that may come after etcd applied the commit. (Other codes, such as DATA_LOSS for
    // a corrupt cluster, are refusals: unknown_error, final.)
    throw Error(ErrorCode::kCommitUnknownResult,
                where + "the commit failed unexpectedly; it may or may not have been applied (" +
                    describe(status) + ")");
  }
  throw Error(ErrorCode::kUnknownError, where + describe(status));
}

}  // namespace kvq::engine::etcd
