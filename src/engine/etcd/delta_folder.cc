#include "engine/etcd/delta_folder.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "common/bytes.h"
#include "common/random.h"
#include "engine/etcd/key_group.h"

namespace kvq::engine::etcd {
namespace {

namespace pb = ::etcdserverpb;

void pin(pb::TxnRequest& txn, const std::string& etcd_key, std::int64_t mod_revision) {
  pb::Compare* c = txn.add_compare();
  c->set_key(etcd_key);
  c->set_target(pb::Compare::MOD);
  c->set_result(pb::Compare::EQUAL);
  c->set_mod_revision(mod_revision);
}

// True if every live delta of `g` has one operand length.
bool one_length(const KeyGroup& g) {
  std::optional<std::size_t> length;
  for (const Delta& d : g.deltas) {
    if (!g.live(d)) continue;
    if (length && *length != d.operand.size()) return false;
    length = d.operand.size();
  }
  return true;
}

// The fold Txn of `g`, whose base record is at `base_key`, folding up to `max_folded` deltas.
pb::TxnRequest fold_txn(const KeyGroup& g, const std::string& base_key, std::size_t max_folded) {
  pb::TxnRequest txn;
  pin(txn, base_key, g.base ? g.base->second : 0);  // base unchanged (or still absent)
  std::optional<std::string> sum;
  const std::size_t n = std::min(g.deltas.size(), max_folded);
  for (std::size_t i = 0; i < n; ++i) {
    const Delta& d = g.deltas[i];
    pin(txn, d.etcd_key, d.mod);
    txn.add_success()->mutable_request_delete_range()->set_key(d.etcd_key);
    if (g.live(d)) sum = common::add_le(sum, d.operand);
  }
  if (sum) {
    pb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(base_key + random_delta_id());
    put->set_value(*sum);
  }
  return txn;
}

}  // namespace

void DeltaFolder::fold(const std::string& key, std::size_t min_deltas) noexcept {
  try {
    const std::string base_key = cluster_.codec().encode(key);
    const auto mark = cluster_.start_folding(base_key);
    if (!mark) return;  // another thread is folding it
    fold_group(base_key, min_deltas);
  } catch (...) {
    // Best effort: the records stay for a later fold.
  }
}

void DeltaFolder::fold_group(const std::string& base_key, std::size_t min_deltas) {
  pb::RangeRequest rr;
  rr.set_key(base_key);
  rr.set_range_end(KeyCodec::group_end(base_key));
  pb::RangeResponse resp = cluster_.range(rr, "fold");
  std::vector<KeyGroup> groups = group_records(cluster_.codec(), resp.kvs());
  if (groups.size() != 1 || groups[0].deltas.size() < min_deltas) return;
  if (!one_length(groups[0])) return;
  pb::TxnResponse out;
  // A Txn of n deltas has n + 1 compares and n + 1 operations: within the server's --max-txn-ops
  // (a fold past it was refused every time, and the key's deltas piled up).
  const std::size_t max_ops = cluster_.options().max_txn_ops;
  const std::size_t max_folded = std::min(kMaxFolded, max_ops > 2 ? max_ops - 1 : 1);
  cluster_.txn_once(fold_txn(groups[0], base_key, max_folded),
                    &out);  // failure leaves them for later
}

bool DeltaFolder::fold_dice() { return common::random_u64() % 64 == 0; }

}  // namespace kvq::engine::etcd
