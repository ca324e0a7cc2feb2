#include "kvq/error.h"

namespace kvq {

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string(error_name(code)) + " (" +
                         std::to_string(static_cast<int>(code)) + "): " + message),
      code_(code) {}

std::string_view Error::name() const noexcept { return error_name(code_); }

bool Error::retryable() const noexcept {
  switch (code_) {
    case ErrorCode::kNotCommitted:
    case ErrorCode::kTransactionTooOld:
    case ErrorCode::kFutureVersion:
    case ErrorCode::kCommitUnknownResult:
    case ErrorCode::kProcessBehind:
      return true;
    default:
      return false;
  }
}

bool Error::maybe_committed() const noexcept { return code_ == ErrorCode::kCommitUnknownResult; }

namespace {

// Every ErrorCode with its name, as FoundationDB names its errors.
struct NamedCode {
  ErrorCode code;
  std::string_view name;
};
constexpr NamedCode kErrorNames[] = {
    {ErrorCode::kTimedOut, "timed_out"},
    {ErrorCode::kTransactionTooOld, "transaction_too_old"},
    {ErrorCode::kFutureVersion, "future_version"},
    {ErrorCode::kNotCommitted, "not_committed"},
    {ErrorCode::kCommitUnknownResult, "commit_unknown_result"},
    {ErrorCode::kTransactionCancelled, "transaction_cancelled"},
    {ErrorCode::kConnectionFailed, "connection_failed"},
    {ErrorCode::kTransactionTimedOut, "transaction_timed_out"},
    {ErrorCode::kTooManyWatches, "too_many_watches"},
    {ErrorCode::kProcessBehind, "process_behind"},
    {ErrorCode::kOperationCancelled, "operation_cancelled"},
    {ErrorCode::kIoError, "io_error"},
    {ErrorCode::kClientInvalidOperation, "client_invalid_operation"},
    {ErrorCode::kKeyOutsideLegalRange, "key_outside_legal_range"},
    {ErrorCode::kInvertedRange, "inverted_range"},
    {ErrorCode::kInvalidOptionValue, "invalid_option_value"},
    {ErrorCode::kUsedDuringCommit, "used_during_commit"},
    {ErrorCode::kNoCommitVersion, "no_commit_version"},
    {ErrorCode::kTransactionTooLarge, "transaction_too_large"},
    {ErrorCode::kKeyTooLarge, "key_too_large"},
    {ErrorCode::kValueTooLarge, "value_too_large"},
    {ErrorCode::kConnectionStringInvalid, "connection_string_invalid"},
    {ErrorCode::kUnsupportedOperation, "unsupported_operation"},
    {ErrorCode::kUnknownError, "unknown_error"},
    {ErrorCode::kInternalError, "internal_error"},
    {ErrorCode::kPermissionDenied, "permission_denied"},
    {ErrorCode::kInvalidTuple, "invalid_tuple"},
    {ErrorCode::kKeyOutsideSubspace, "key_outside_subspace"},
    {ErrorCode::kDatabaseInUse, "database_in_use"},
    {ErrorCode::kDatabaseFull, "database_full"},
    {ErrorCode::kInvalidArgument, "invalid_argument"},
    {ErrorCode::kCorruption, "corruption"},
    {ErrorCode::kLeaseLost, "lease_lost"},
    {ErrorCode::kInvalidLeaseToken, "invalid_lease_token"},
    {ErrorCode::kAuthenticationFailed, "authentication_failed"},
};

}  // namespace

std::string_view error_name(ErrorCode code) noexcept {
  for (const NamedCode& entry : kErrorNames) {
    if (entry.code == code) return entry.name;
  }
  return "unknown_error";
}

}  // namespace kvq
