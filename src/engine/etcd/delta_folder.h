// Internal (etcd engine): keeps a key's delta records (see key_codec.h) few by folding them into
// one, best effort.
//
// Example:
//   if (g.deltas.size() >= DeltaFolder::kFoldOnRead) {
//     DeltaFolder(*cluster).fold(g.key, DeltaFolder::kFoldOnRead);
//   }
#ifndef KVQ_SRC_ENGINE_ETCD_DELTA_FOLDER_H_
#define KVQ_SRC_ENGINE_ETCD_DELTA_FOLDER_H_

#include <cstddef>
#include <string>

#include "engine/etcd/cluster.h"

namespace kvq::engine::etcd {

// Folds delta records through one Cluster. Thread-safe (stateless beyond the cluster).
class DeltaFolder {
 public:
  // A read folds a key with this many delta records...
  static constexpr std::size_t kFoldOnRead = 32;
  // ...a commit that added to a key folds it if it has this many, with probability 1/64
  // (fold_dice), so fold Txns stay rare.
  static constexpr std::size_t kFoldOnCommit = 16;
  // Delta records folded by one Txn at most (fewer under a --max-txn-ops below 101: the Txn has
  // one compare and one operation more than it folds).
  static constexpr std::size_t kMaxFolded = 100;

  explicit DeltaFolder(Cluster& cluster) : cluster_(cluster) {}

  // Reads `key`'s group at the latest revision and, if it has at least `min_deltas` delta
  // records, replaces up to kMaxFolded of them (within max_txn_ops) by one delta holding their sum
  // (stale ones, older than the base, are just deleted), in one Txn pinning the base and every
  // record folded, so it fails harmlessly if any of them moved meanwhile. Returns at once if
  // another thread is folding the key through the same Cluster (many readers of a hot counter would
  // all fold it at once). Keys whose live deltas have different operand lengths are left alone
  // (such adds do not commute). Never throws.
  void fold(const std::string& key, std::size_t min_deltas) noexcept;

  // True with probability 1/64.
  static bool fold_dice();

 private:
  // fold() of the key whose base record is at `base_key`, which this thread holds the mark of
  // (Cluster::start_folding). Throws what the RPCs throw.
  void fold_group(const std::string& base_key, std::size_t min_deltas);

  Cluster& cluster_;
};

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_DELTA_FOLDER_H_
