// Internal: process-wide counters of the high-contention machinery, for `kvq bench` and tests.
#ifndef KVQ_SRC_LAYERS_CONTENTION_STATS_H_
#define KVQ_SRC_LAYERS_CONTENTION_STATS_H_

#include <atomic>
#include <cstdint>

namespace kvq::detail {

// Monotonic counters (relaxed atomics), shared by every queue of the process.
struct ContentionStats {
  std::atomic<std::uint64_t> fast_pops{0};        // pops done by the fast path
  std::atomic<std::uint64_t> staged_pops{0};      // pops that registered a request
  std::atomic<std::uint64_t> requests{0};         // requests registered (one per staged group)
  std::atomic<std::uint64_t> batches{0};          // committed fulfilment transactions (leased)
  std::atomic<std::uint64_t> batch_conflicts{0};  // fulfilment attempts that failed to commit
  std::atomic<std::uint64_t> served{0};           // requests answered by leased batches
  std::atomic<std::uint64_t> watch_waits{0};      // waits on a slot watch
  std::atomic<std::uint64_t> budget_cuts{0};      // batches cut short by the engine's limits
  std::atomic<std::uint64_t> expired{0};          // abandoned requests withdrawn by a fulfiller
  std::atomic<std::uint64_t> reclaimed{0};        // abandoned deliveries put back in the queue
  std::atomic<std::uint64_t> abandoned{0};        // pops that failed and withdrew their request
};
ContentionStats& contention_stats();

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_CONTENTION_STATS_H_
