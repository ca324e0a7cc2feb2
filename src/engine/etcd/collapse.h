// Internal (etcd engine): a transaction's mutations collapsed into at most one etcd write per key,
// as one etcd Txn needs (etcd refuses a key twice in one Txn and a put inside a deleted range).
//
// Example:
//   Collapsed c = collapse(request.mutations, stamp, CollapseMode::kValues);
//   // c.final_values: key -> value or nullopt (delete); c.cleared: merged clear ranges;
//   // c.deltas: adds on values the transaction does not know, to write as delta records.
#ifndef KVQ_SRC_ENGINE_ETCD_COLLAPSE_H_
#define KVQ_SRC_ENGINE_ETCD_COLLAPSE_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"

namespace kvq::engine::etcd {

// What a collapse keeps.
enum class CollapseMode {
  kValues,     // every value, for the commit
  kShapeOnly,  // no value bytes (values empty, add operands zero-filled to their length): just
               // enough to count the Txn's operations, without copying values
};

// Mutations collapsed into one etcd op per key.
struct Collapsed {
  std::map<std::string, std::optional<std::string>> final_values;  // key -> value (nullopt: delete)
  std::vector<KeyRange> cleared;                                   // merged clear ranges
  // key -> operands to add, in order, to its committed value (written as delta records: no
  // read, no pin). Consecutive operands of one length are summed into one.
  std::map<std::string, std::vector<std::string>> deltas;
  bool needs_stamp = false;  // some mutation is versionstamped
};

// Collapses `mutations` (applied in order). `stamp`: the 10-byte versionstamp to splice into
// versionstamped keys and values; "" = none yet: versionstamped mutations then only set
// needs_stamp (in kShapeOnly mode a placeholder stamp is used instead, so that they are counted).
// Throws client_invalid_operation for a versionstamp operand whose offset does not fit.
Collapsed collapse(const std::vector<Mutation>& mutations, std::string_view stamp,
                   CollapseMode mode = CollapseMode::kValues);

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_COLLAPSE_H_
