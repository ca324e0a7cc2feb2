// Engines the layer tests run on: every engine of the conformance suite (support/engines.h:
// memory always, rocksdb/etcd when built and registered there), each giving a fresh database.
#ifndef KVQ_TESTS_SUPPORT_LAYER_ENGINES_H_
#define KVQ_TESTS_SUPPORT_LAYER_ENGINES_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
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

// The items of one history of a concurrency test on `engine`: test_items(), at most
// $KVQ_TEST_ROCKSDB_ITEMS (10,000) on rocksdb, whose runs grow faster than their items
// (docs/engines.md, "Known limits"), and $KVQ_TEST_ETCD_ITEMS (1,500) on etcd, which commits a
// few thousand transactions a second.
inline int history_items(std::string_view engine) {
  if (engine == "etcd") return static_cast<int>(env_int("KVQ_TEST_ETCD_ITEMS", 1500));
  if (engine == "rocksdb") {
    return static_cast<int>(std::min(test_items(), env_int("KVQ_TEST_ROCKSDB_ITEMS", 10000)));
  }
  return static_cast<int>(test_items());
}

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_LAYER_ENGINES_H_
