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

// An integer from environment variable `name`, or `fallback` (for test sizes: TSan runs shrink).
long env_int(const char* name, long fallback);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_LAYER_ENGINES_H_
