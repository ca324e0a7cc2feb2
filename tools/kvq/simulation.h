// One seed of `kvq simulate`: a deterministic simulation of clients on one structure of the memory
// engine (a work Queue, a PriorityQueue or a FairQueue, a third of the seeds each), with injected
// faults, in simulated time, then a check of the whole history.
//
// The seed decides everything: the structure; plain or high-contention pops (Queue and
// PriorityQueue); the number of clients and their operations (push, push_batch, delayed push,
// pop, pop_wait, take, take_batch and take_wait whose leases are acked, nacked with or without a
// delay, acked late or abandoned to expire, sleeps; a PriorityQueue's pops and takes from the low
// end three times in four, priorities 0-3; a FairQueue's pushes to three tenants, its takes one
// at a time), the fault rates (commit_unknown_result applied and not applied, spurious
// not_committed, transaction_too_old on reads), and the schedule: the clients are threads run one
// at a time by a common::SimulatedClock, which switches between them at every engine call and
// every sleep or wait (engine::SchedulingEngine), in an order drawn from the seed, and moves
// simulated time to the next deadline when all are asleep. After the clients, faults are switched
// off, time moves on an hour (every lease runs out) and the structure is drained (pop; pop_min).
//
// The check (history.h for order): every pushed value delivered exactly once (popped, or taken and
// acked), nothing delivered that was not pushed, nothing delivered again after its delivery, no
// empty pop or take (or wait) while an item was ready throughout, and an empty structure at the
// end; over first deliveries (an item's lease running out or a nack without delay puts it back at
// its place): FIFO (Queue); every pop_min / take_min (pop_max / take_max) returns an item whose
// priority is <= (>=) that of every item ready throughout the call, and FIFO within one priority
// for the items first delivered from the low end (PriorityQueue); FIFO within each tenant
// (FairQueue). Items pushed with a delay are left out of the order and empty-pop rules. A
// FairQueue seed ends with a fairness probe (one thread, no faults): 1-4 items for each of three
// tenants, popped until empty, must come round-robin (no tenant served twice while another with
// items waits), each once, in tenant order.
//
// Example:
//   kvq::cli::SeedResult r = kvq::cli::simulate_seed(42);
//   if (!r.problems.empty()) std::puts(r.problems[0].c_str());
#ifndef KVQ_TOOLS_KVQ_SIMULATION_H_
#define KVQ_TOOLS_KVQ_SIMULATION_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::cli {

// What one seed did and found.
struct SeedResult {
  std::uint64_t seed = 0;
  std::string structure;  // "Queue", "PriorityQueue" or "FairQueue"
  std::int64_t clients = 0;
  std::int64_t operations = 0;  // queue operations the clients called, and the drain's pops
  std::int64_t pushed = 0;
  std::int64_t popped = 0;         // delivered by pop (clients and drain)
  std::int64_t acked = 0;          // delivered by take + ack
  std::int64_t leases_lost = 0;    // acks, nacks, extends that found their lease gone (ran out)
  std::int64_t extended = 0;       // leases extended (then acked, maybe too late)
  std::int64_t redeliveries = 0;   // takes of an item delivered before (after a nack or expiry)
  bool high_contention = false;    // the pops: high-contention staging, or plain (not FairQueue)
  bool combine = false;            // the clients' operations combined (QueueOptions::combine)
  std::int64_t combined = 0;       // ... operations served by another client's group
  std::int64_t fairness_pops = 0;  // pops of the FairQueue fairness probe
  std::int64_t weights_set = 0;    // FairQueue: the clients' set_weight calls
  int lease_limit = 0;             // FairQueue: max_leased_per_tenant (0: none)
  std::int64_t limited_takes = 0;  // takes checked against the lease limit
  std::int64_t waits = 0;          // pop_wait and take_wait calls
  std::int64_t waits_empty = 0;    // ... that timed out with nothing
  std::int64_t delayed_pushes = 0, delayed_nacks = 0;
  std::uint64_t steps = 0;        // scheduling decisions
  std::int64_t simulated_ms = 0;  // simulated time the clients took
  std::uint64_t unknown_applied = 0, unknown_not_applied = 0, conflicts = 0, too_old = 0;
  std::uint64_t digest = 0;           // of the whole trace: equal for equal runs
  std::vector<std::string> problems;  // violations and unexpected errors; empty if the seed passed
};

// Runs seed `seed` (see the file comment). Deterministic: the same seed gives the same result,
// digest included. Installs its own simulated clock for the run (no other kvq database may be in
// use in the process meanwhile). Never throws for what the clients hit: errors are problems.
SeedResult simulate_seed(std::uint64_t seed);

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_SIMULATION_H_
