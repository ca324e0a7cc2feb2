// kvq/error.h: the one exception type of kvq, and the error taxonomy in one place.
//
// Every kvq failure is a kvq::Error carrying a numeric code. Where FoundationDB has an error for
// the situation, the code and name are FoundationDB's (see its error_definitions.h), so anyone who
// knows FDB knows what to do with it. Codes kvq adds for itself are in the 9000 range.
//
// Which errors to retry (the same classification as FoundationDB's fdb_error_predicate):
//   retryable():        not_committed, transaction_too_old, future_version, commit_unknown_result,
//                       process_behind. Database::run and Transaction::on_error retry exactly
//                       these. (connection_failed is final: engines fail over between servers
//                       themselves and report it only when no server answers.)
//   maybe_committed():  commit_unknown_result. The commit may or may not have happened; anything
//   that
//                       must not happen twice needs an identity chosen outside the retry loop.
//   retryable_not_committed(): retryable() && !maybe_committed().
// Everything else (bad input, limits, timeouts, I/O) is final and goes to the caller.
// lease_lost (work queues, kvq/lease.h) is final too: the lease of an ack / nack / extend is gone,
// the item is (or will be) another worker's; drop the work, nothing was changed. Inside your own
// retry loop it can also mean that an earlier attempt of the same transaction committed the ack.
//
// Example:
//   try {
//     tr.commit();
//   } catch (const kvq::Error& e) {
//     if (!e.retryable()) throw;        // or simply: tr.on_error(e);
//   }
#ifndef KVQ_ERROR_H_
#define KVQ_ERROR_H_

#include <stdexcept>
#include <string>
#include <string_view>

namespace kvq {

// Error codes. Values below 9000 are FoundationDB's codes with FoundationDB's meaning.
enum class ErrorCode : int {
  kTimedOut = 1004,                 // timed_out: a wait (e.g. on a watch) passed its deadline
  kTransactionTooOld = 1007,        // transaction_too_old: read version left the MVCC window
  kFutureVersion = 1009,            // future_version
  kNotCommitted = 1020,             // not_committed: conflict with a concurrent commit
  kCommitUnknownResult = 1021,      // commit_unknown_result: may or may not have committed
  kTransactionCancelled = 1025,     // transaction_cancelled: reset/destroyed while in use
  kConnectionFailed = 1026,         // connection_failed: a server could not be reached
  kTransactionTimedOut = 1031,      // transaction_timed_out: the `timeout` option expired
  kTooManyWatches = 1032,           // too_many_watches: no more watches can be armed (etcd: a
                                    // watch's thread could not be started)
  kProcessBehind = 1037,            // process_behind: storage lagging; retry
  kOperationCancelled = 1101,       // operation_cancelled: e.g. a cancelled watch
  kIoError = 1510,                  // io_error: the durable engine could not read or write
  kClientInvalidOperation = 2000,   // client_invalid_operation: API misuse
  kKeyOutsideLegalRange = 2004,     // key_outside_legal_range
  kInvertedRange = 2005,            // inverted_range: begin > end
  kInvalidOptionValue = 2006,       // invalid_option_value
  kUsedDuringCommit = 2017,         // used_during_commit
  kNoCommitVersion = 2021,          // no_commit_version: read-only transaction has no version
  kTransactionTooLarge = 2101,      // transaction_too_large: more than 10,000,000 bytes
  kKeyTooLarge = 2102,              // key_too_large: more than 10,000 bytes
  kValueTooLarge = 2103,            // value_too_large: more than 100,000 bytes
  kConnectionStringInvalid = 2104,  // connection_string_invalid: malformed or unknown URL
  kUnsupportedOperation = 2108,     // unsupported_operation: the engine cannot do this
  kUnknownError = 4000,             // unknown_error
  kInternalError = 4100,            // internal_error: a bug in kvq
  kPermissionDenied = 6000,         // permission_denied: the server refuses this user the data

  // kvq's own codes.
  kInvalidTuple = 9001,        // malformed tuple bytes, or a tuple element of the wrong type
  kKeyOutsideSubspace = 9002,  // Subspace::unpack of a key that does not start with the prefix
  kDatabaseInUse = 9003,       // the durable database is locked by another process
  kDatabaseFull = 9004,        // the store refuses writes for lack of space (etcd NOSPACE)
  kInvalidArgument = 9005,     // bad argument to a kvq function (e.g. CLI input)
  kCorruption = 9006,          // stored data is not what kvq wrote
  kLeaseLost = 9007,           // the lease of an ack / nack / extend is gone: it ran out and the
                               // item was moved back (maybe taken again), or it was acked or
                               // nacked already; nothing was changed
  kInvalidLeaseToken = 9008,   // a lease token that is malformed or names another queue
  // The server refused the credentials: wrong user or password, or it requires authentication
  // and none was given (etcd's Auth). Final: retrying with the same credentials cannot succeed.
  kAuthenticationFailed = 9009,
};

// The exception thrown by every kvq function. Copyable, cheap, thread-compatible.
class Error : public std::runtime_error {
 public:
  // `message` says what happened and where (e.g. "tuple: truncated integer at offset 7").
  Error(ErrorCode code, const std::string& message);

  ErrorCode code() const noexcept { return code_; }
  // The numeric code, as FoundationDB would report it.
  int value() const noexcept { return static_cast<int>(code_); }
  // FoundationDB's snake_case name of the code ("not_committed"), or kvq's for 9000+ codes.
  std::string_view name() const noexcept;

  // True for errors a retry loop should retry (see the file comment for the list).
  bool retryable() const noexcept;
  // True if a commit that failed with this error may nevertheless have been applied.
  bool maybe_committed() const noexcept;
  // True for retryable errors whose transaction certainly did not commit.
  bool retryable_not_committed() const noexcept { return retryable() && !maybe_committed(); }

 private:
  ErrorCode code_;
};

// FoundationDB's snake_case name for `code` ("transaction_too_old").
std::string_view error_name(ErrorCode code) noexcept;

}  // namespace kvq

#endif  // KVQ_ERROR_H_
