// Engines the layer tests run on: a name and a factory for a fresh, empty database. An engine
// that is not built into this binary (its URL scheme unknown) or has no server configured makes
// its tests skip.
//   memory    always
//   rocksdb   a fresh directory under $TMPDIR (if built with KVQ_WITH_ROCKSDB)
//   etcd      $KVQ_TEST_ETCD_URL if set, else a real 1-member etcd started once per test
//             process (skipped if etcd is not installed); fresh key prefix per database
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

// memory, rocksdb, etcd (see file comment).
std::vector<LayerEngine> layer_engines();

// An integer from environment variable `name`, or `fallback` (for test sizes: TSan runs shrink).
long env_int(const char* name, long fallback);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_LAYER_ENGINES_H_
