// Internal: the dead-letter queue of a Queue / PriorityQueue: a kvq::Queue in the sub-subspace
// subspace + ("kvq", "dead") whose item keys carry what the item went through:
//   dead + (index, random, attempts, priority, reason) = the item's value
// so a plain Queue over that subspace pops the values, and redrive() knows where they go back.
#ifndef KVQ_SRC_LAYERS_DEAD_LETTERS_H_
#define KVQ_SRC_LAYERS_DEAD_LETTERS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"
#include "kvq/lease.h"
#include "kvq/subspace.h"
#include "layers/contention/control.h"

namespace kvq::detail {

class DeadLetters {
 public:
  // The dead-letter queue stored under `dead`.
  explicit DeadLetters(Subspace dead);

  // Appends `value` at the back (a snapshot read of the last key: no conflicts between adds).
  // `reason` (UTF-8: check_reason) is cut to at most kMaxReasonSize bytes, between characters.
  void add(Transaction& tr, std::string_view value, int attempts, std::int64_t priority,
           std::string_view reason);
  // Throws invalid_argument unless `reason` is UTF-8 (it is stored as a tuple string, which a
  // reader decodes as such).
  static void check_reason(std::string_view reason);
  // Removes up to `n` items from the front (a non-snapshot read) and returns them: the first, and
  // those after it while their keys and values, counted twice (the letter's clear and its move
  // elsewhere), stay within `max_bytes`.
  std::vector<DeadLetter> take_front(Transaction& tr, int n, std::size_t max_bytes);
  // Up to `n` items from the front, without removing them (snapshot read).
  std::vector<DeadLetter> peek(Transaction& tr, int n);
  // The number of dead letters (one snapshot read of the counter).
  std::int64_t size(Transaction& tr);

  const Subspace& subspace() const { return dead_; }

  static constexpr std::size_t kMaxReasonSize = 1000;

 private:
  // `reason` cut to at most kMaxReasonSize bytes, before the character the limit falls in.
  static std::string_view cut_reason(std::string_view reason);

  std::vector<KeyValue> front(Transaction& tr, int n, bool snapshot);
  DeadLetter decode(const KeyValue& kv) const;

  Subspace dead_;
  contention::ItemRange items_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_DEAD_LETTERS_H_
