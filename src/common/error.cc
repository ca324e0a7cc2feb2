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

std::string_view error_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kTimedOut:
      return "timed_out";
    case ErrorCode::kTransactionTooOld:
      return "transaction_too_old";
    case ErrorCode::kFutureVersion:
      return "future_version";
    case ErrorCode::kNotCommitted:
      return "not_committed";
    case ErrorCode::kCommitUnknownResult:
      return "commit_unknown_result";
    case ErrorCode::kTransactionCancelled:
      return "transaction_cancelled";
    case ErrorCode::kConnectionFailed:
      return "connection_failed";
    case ErrorCode::kTransactionTimedOut:
      return "transaction_timed_out";
    case ErrorCode::kProcessBehind:
      return "process_behind";
    case ErrorCode::kOperationCancelled:
      return "operation_cancelled";
    case ErrorCode::kIoError:
      return "io_error";
    case ErrorCode::kClientInvalidOperation:
      return "client_invalid_operation";
    case ErrorCode::kKeyOutsideLegalRange:
      return "key_outside_legal_range";
    case ErrorCode::kInvertedRange:
      return "inverted_range";
    case ErrorCode::kInvalidOptionValue:
      return "invalid_option_value";
    case ErrorCode::kUsedDuringCommit:
      return "used_during_commit";
    case ErrorCode::kNoCommitVersion:
      return "no_commit_version";
    case ErrorCode::kTransactionTooLarge:
      return "transaction_too_large";
    case ErrorCode::kKeyTooLarge:
      return "key_too_large";
    case ErrorCode::kValueTooLarge:
      return "value_too_large";
    case ErrorCode::kConnectionStringInvalid:
      return "connection_string_invalid";
    case ErrorCode::kUnsupportedOperation:
      return "unsupported_operation";
    case ErrorCode::kUnknownError:
      return "unknown_error";
    case ErrorCode::kInternalError:
      return "internal_error";
    case ErrorCode::kInvalidTuple:
      return "invalid_tuple";
    case ErrorCode::kKeyOutsideSubspace:
      return "key_outside_subspace";
    case ErrorCode::kDatabaseInUse:
      return "database_in_use";
    case ErrorCode::kDatabaseFull:
      return "database_full";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kCorruption:
      return "corruption";
  }
  return "unknown_error";
}

}  // namespace kvq
