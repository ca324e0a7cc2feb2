// The structures a seed of `kvq simulate` runs (simulation.h), behind the one interface its
// clients call: a work Queue, a PriorityQueue or a FairQueue of the simulated database, under
// the subspace ("sim").
//
// Example:
//   std::unique_ptr<Target> t = make_target(Structure::kPriorityQueue, db, queue_options);
//   t->push({{"v", 0, ""}}, std::chrono::milliseconds(0));
//   std::optional<std::string> v = t->pop(history::PopKind::kFifo);
#ifndef KVQ_TOOLS_KVQ_SIMULATED_STRUCTURE_H_
#define KVQ_TOOLS_KVQ_SIMULATED_STRUCTURE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/testing/fault_injection.h"
#include "kvq/kvq.h"
#include "tools/kvq/history.h"

namespace kvq::cli {

// The structures a seed may run.
enum class Structure { kQueue, kPriorityQueue, kFairQueue };

// "Queue", "PriorityQueue" or "FairQueue".
const char* structure_name(Structure s);

// The constant (2^64 / golden ratio) a seed is mixed with to derive independent choices from it.
inline constexpr std::uint64_t kSeedMix = 0x9e3779b97f4a7c15ULL;
// The structure a seed runs, from the seed: a third each.
Structure structure_of(std::uint64_t seed);
// Plain or high-contention pops (Queue and PriorityQueue), with or without combining, from the
// seed.
QueueOptions queue_options(std::uint64_t seed);
// The fault rates of a seed: each kind up to 10% of commits (too_old up to 2% of reads), the
// fault wrapper's generator seeded with the seed.
engine::FaultInjectionOptions fault_options(std::uint64_t seed);
// A FairQueue's FairQueueOptions::max_leased_per_tenant, from the seed: 0 (none) for half the
// seeds, else 1 or 2.
int lease_limit_of(std::uint64_t seed);

// What a client pushes: a value (unique in the run), its priority (PriorityQueue) and its tenant
// (FairQueue).
struct Item {
  std::string value;
  std::int64_t priority = 0;
  std::string tenant;
};

// The structure under test as the clients call it; `kind` picks a PriorityQueue's end (kMin,
// kMax) and is kFifo for the others. Calls go straight to the structure's own operations.
class Target {
 public:
  virtual ~Target() = default;
  // Every call below throws what the structure's operation throws.
  // One push (with `delay`), or one push_batch of `items` (one tenant; no delay).
  virtual void push(const std::vector<Item>& items, std::chrono::milliseconds delay) = 0;
  // One pop / blocking pop from `kind`'s end: the value (a FairQueue's without its tenant), or
  // nullopt if nothing was ready (by `timeout`).
  virtual std::optional<std::string> pop(history::PopKind kind) = 0;
  virtual std::optional<std::string> pop_wait(history::PopKind kind,
                                              std::chrono::milliseconds timeout) = 0;
  // One take (n == 1) or one take_batch of up to n (a FairQueue: always one take) under leases of
  // `vt`; empty if nothing was ready.
  virtual std::vector<Lease> take(history::PopKind kind, std::size_t n,
                                  std::chrono::milliseconds vt) = 0;
  // One blocking take: the lease, or nullopt if nothing came by `timeout`.
  virtual std::optional<Lease> take_wait(history::PopKind kind, std::chrono::milliseconds vt,
                                         std::chrono::milliseconds timeout) = 0;
  // Ack / nack (with `delay`) / extend (to `vt` from now) of a lease of this structure
  // (lease_lost once it is gone).
  virtual void ack(const Lease& lease) = 0;
  virtual void nack(const Lease& lease, std::chrono::milliseconds delay) = 0;
  virtual void extend(const Lease& lease, std::chrono::milliseconds vt) = 0;
  // Items ready, delayed, leased or dead letters.
  virtual std::int64_t left() = 0;
  // FairQueue::set_weight; the other structures have no tenants (throws std::logic_error).
  virtual void set_weight(const std::string& tenant, std::int64_t weight);
};

// A `s` under ("sim") of `db` with the options `o` (a FairQueue: its combine, high_contention and
// contention, and `lease_limit` as its max_leased_per_tenant).
std::unique_ptr<Target> make_target(Structure s, std::shared_ptr<Database> db, QueueOptions o,
                                    int lease_limit);

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_SIMULATED_STRUCTURE_H_
