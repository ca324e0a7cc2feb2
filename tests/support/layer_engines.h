// Engines the layer tests run on: every engine of the conformance suite (support/engines.h:
// memory always, rocksdb/etcd when built and registered there), each giving a fresh database.
#ifndef KVQ_TESTS_SUPPORT_LAYER_ENGINES_H_
#define KVQ_TESTS_SUPPORT_LAYER_ENGINES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvq/database.h"

namespace kvq::testing {

struct LayerEngine {
  std::string name;
  // A fresh database, or nullptr with `*skip_reason` set if this engine cannot run here.
  std::function<std::shared_ptr<Database>(std::string* skip_reason)> open;
};

// One entry per conformance engine (see file comment).
std::vector<LayerEngine> layer_engines();

// An integer from environment variable `name`, or `fallback` (for test sizes).
long env_int(const char* name, long fallback);

// True in sanitizer builds (-DKVQ_SANITIZE=...), where the concurrency tests use smaller default
// sizes so that a test binary stays under a minute; KVQ_TEST_ITEMS overrides either way.
constexpr bool kSanitizerBuild =
#ifdef KVQ_SANITIZER_BUILD  // tests/CMakeLists.txt defines it when KVQ_SANITIZE is set
    true;
#else
    false;
#endif

// The number of items the concurrency tests push in total: $KVQ_TEST_ITEMS, else 50,000 (8,000
// in sanitizer builds).
inline long test_items() { return env_int("KVQ_TEST_ITEMS", kSanitizerBuild ? 8000 : 50000); }

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_LAYER_ENGINES_H_
