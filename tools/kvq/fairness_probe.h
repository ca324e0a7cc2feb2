// The fairness probe of a `kvq simulate` FairQueue seed (simulation.h): after the drain, on one
// thread and without faults, a weight of 1-3 and 1-6 items for each of three tenants, then pops
// until empty; each item must come once, in its tenant's order, and the turns in weighted
// round-robin (history::weighted_round_break; docs/queues.md, "Fair queues").
#ifndef KVQ_TOOLS_KVQ_FAIRNESS_PROBE_H_
#define KVQ_TOOLS_KVQ_FAIRNESS_PROBE_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tools/kvq/simulated_structure.h"

namespace kvq::cli {

struct ProbeResult {
  std::int64_t pushed = 0;
  std::vector<std::string> popped;    // in the order the pops returned them
  std::vector<std::string> problems;  // what broke: order, round-robin, or the items themselves
};

// Runs the probe on `target` (a drained FairQueue), its item counts drawn from `seed`. Throws what
// the FairQueue's operations throw.
ProbeResult probe_fairness(Target& target, std::uint64_t seed);

// A client's set_weight on `target` (a FairQueue) of one of the three tenants the simulation's
// clients push to, to 1-3, drawn from `rng`, while other clients push, pop and take. It has no
// check of its own: the history checks must hold through it, and the probe sets weights again
// and checks the turns they give. Returns "tenant=weight" (for the trace).
std::string set_random_weight(Target& target, std::mt19937_64& rng);

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_FAIRNESS_PROBE_H_
