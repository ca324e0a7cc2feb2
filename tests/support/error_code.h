// The kvq::ErrorCode a call throws, for tests of bad input.
#ifndef KVQ_TESTS_SUPPORT_ERROR_CODE_H_
#define KVQ_TESTS_SUPPORT_ERROR_CODE_H_

#include <functional>

#include "kvq/error.h"

namespace kvq::testing {

// The code of the kvq::Error `fn` throws; kUnknownError (the tests' "no error" marker) if it
// throws none.
inline ErrorCode code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kUnknownError;
}

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_ERROR_CODE_H_
