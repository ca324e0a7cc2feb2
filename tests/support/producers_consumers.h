// Test support: the producers-and-consumers run that the history tests share. Producer threads
// push numbered values while consumer threads pop, each call timed; the caller checks the history
// (history::check) with what is left in the structure.
//
// Example:
//   Queue q(db, space);
//   testing::History h = testing::run_producers_and_consumers({
//       .producers = 2, .consumers = 6, .items = 1000,
//       .push = [&](const history::Push& p) { q.push(p.value); },
//       .pop = [&](int, int) { return testing::PopOutcome{.value = q.pop()}; }});
//   history::Result r = history::check(h.pushes, h.pops);
#ifndef KVQ_TESTS_SUPPORT_PRODUCERS_CONSUMERS_H_
#define KVQ_TESTS_SUPPORT_PRODUCERS_CONSUMERS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tools/kvq/history.h"

namespace kvq::testing {

// What one consumer call did: a pop of `kind` that answered `value` (nullopt: "empty"), or, with
// `answered` false, a call that ended without an answer and took nothing (a pop that threw
// timed_out): left out of the history.
struct PopOutcome {
  history::PopKind kind = history::PopKind::kFifo;
  std::optional<std::string> value = std::nullopt;
  bool answered = true;
};

struct ProducersAndConsumers {
  int producers = 1;
  int consumers = 1;
  // Values "0" .. items - 1: producer p pushes p, p + producers, p + 2 * producers, ... in order.
  int items = 0;
  // The priority of value i (history::Push::priority; 0 for a Queue).
  std::function<std::int64_t(int i)> priority_of = [](int) { return std::int64_t{0}; };
  // Pushes one value (p.value with p.priority).
  std::function<void(const history::Push& p)> push;
  // Consumer c's k-th call (k = 0, 1, ...).
  std::function<PopOutcome(int c, int k)> pop;
};

// The operations of a run, each with its start and end (history::now_ns).
struct History {
  std::vector<history::Push> pushes;
  std::vector<history::Pop> pops;
};

// Runs `run`'s producers and consumers on threads of their own until every producer has pushed
// its values and every consumer has then been answered "empty" twice in a row; returns what they
// did. An exception escaping push or pop ends the process (as in any test thread).
History run_producers_and_consumers(const ProducersAndConsumers& run);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_PRODUCERS_CONSUMERS_H_
