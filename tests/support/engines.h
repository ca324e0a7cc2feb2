// Test support: the engines the conformance suite (tests/conformance_test.cc) runs on, and
// temporary directories for durable engines.
//
// Adding an engine to the suite: append an EngineFactory to conformance_engines() in engines.cc
// (under #ifdef KVQ_WITH_<ENGINE>). Its `open` must return a fresh, empty database on every call
// (rocksdb: a new fresh_temp_dir(); etcd: a fresh key prefix or cluster) honouring the options.
#ifndef KVQ_TESTS_SUPPORT_ENGINES_H_
#define KVQ_TESTS_SUPPORT_ENGINES_H_

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "kvq/database.h"
#include "support/figures.h"

namespace kvq::testing {

// Options a conformance test may ask of an engine.
struct EngineOptions {
  // MVCC window; 0 = the engine's default (5 s).
  std::chrono::milliseconds mvcc_window{0};
};

struct EngineFactory {
  // Test-name-safe name ([A-Za-z0-9_]), e.g. "memory".
  std::string name;
  // Opens a fresh, empty database.
  std::function<std::shared_ptr<kvq::Database>(const EngineOptions&)> open;
};

inline std::ostream& operator<<(std::ostream& os, const EngineFactory& f) { return os << f.name; }

// The engines compiled into this build: "memory" always; rocksdb/etcd when built with them.
std::vector<EngineFactory> conformance_engines();

// The URL query suffix for `options` understood by the pipeline engines ("" or
// "?mvcc_window_ms=N").
std::string pipeline_query(const EngineOptions& options);

// Creates a new empty directory under $TMPDIR (or /tmp); every directory made this way is removed
// recursively when the test process exits.
std::string fresh_temp_dir(const std::string& prefix = "kvq-test");

// The code of the kvq::Error that kvq::open(url) throws; unknown_error if it opens. Counts the
// URL as a bad input tried (tests/support/figures.h).
inline ErrorCode open_error(const std::string& url) {
  record_figure(kUrlsRefused, 1);
  try {
    kvq::open(url);
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kUnknownError;
}

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_ENGINES_H_
