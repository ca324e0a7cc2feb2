// The client threads of one `kvq bench` measurement (cmd_bench.cc): the structures they run on, the
// prefill, the threads' loop, and what they report (ops, latencies, CPU time, the retry and
// high-contention counters). A worker process of `kvq bench --processes` runs the same loop and
// sends its Tally to its parent as JSON.
#ifndef KVQ_TOOLS_KVQ_BENCH_CLIENTS_H_
#define KVQ_TOOLS_KVQ_BENCH_CLIENTS_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvq/kvq.h"
#include "tools/kvq/commands.h"

namespace kvq::cli {

// The structures one measurement runs on: a Queue and a PriorityQueue (kind "queue" or "pq" says
// which is measured) with pop mode "plain" or "hc" and o.combine, in the subspace numbered `seq`
// (fresh for each measurement; the workers of --processes share their parent's).
struct Target {
  Target(std::shared_ptr<Database> db, const BenchOptions& o, const std::string& kind,
         const std::string& mode, int seq)
      : space(Tuple().append("bench").append(seq).append(kind)),
        q(db, space, options(o, mode)),
        pq(db, space, options(o, mode)),
        is_pq(kind == "pq") {}

  // The options of both structures (PriorityQueueOptions is QueueOptions).
  static QueueOptions options(const BenchOptions& o, const std::string& mode) {
    QueueOptions qo;
    qo.high_contention = mode == "hc";
    qo.contention.batch_size = o.batch_size;
    qo.combine = o.combine;
    qo.combine_favors_latency = o.favor_latency;
    return qo;
  }

  Subspace space;
  Queue q;
  PriorityQueue pq;
  bool is_pq;
};

// Pushes `count` items with push_batch (one read of the queue's end per batch); halves the batch
// if the engine refuses its size (etcd takes at most --max-txn-ops writes per transaction).
void prefill(Target& t, int count);

// The counters a measurement reads before and after its run: the Database's retries and conflicts
// and this process's high-contention counters. A worker process reports their differences.
struct Counters {
  std::uint64_t retries = 0, conflicts = 0, staged = 0, fast = 0, batches = 0, batch_conflicts = 0,
                served = 0;

  // The counters of `db` and of this process now.
  static Counters now(const Database& db);
  // What changed from `before` to this.
  Counters since(const Counters& before) const {
    return {retries - before.retries, conflicts - before.conflicts,
            staged - before.staged,   fast - before.fast,
            batches - before.batches, batch_conflicts - before.batch_conflicts,
            served - before.served};
  }
  // Adds the counters of another process.
  Counters& operator+=(const Counters& o);
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Counters, retries, conflicts, staged, fast, batches,
                                   batch_conflicts, served)

// What the client threads of one process did in a measurement.
struct Run {
  std::vector<double> latencies_us;
  double seconds = 0, cpu_seconds = 0;
  bool drained = false;  // a pop found the queue empty (the prefill ran out)

  // Adds the run of another process that ran at the same time.
  // (latencies joined, the longer time, CPU times added)
  Run& operator+=(const Run& o);
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Run, latencies_us, seconds, cpu_seconds, drained)

// What the client threads of one process did: the worker's report to its parent.
struct Tally {
  Run run;
  Counters counters;

  // Adds the tally of another process that ran at the same time.
  Tally& operator+=(const Tally& o) {
    run += o.run;
    counters += o.counters;
    return *this;
  }
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Tally, run, counters)

// Runs `threads` client threads doing `op` ("push", "pop", "take", "cycle" or "flow", as --ops) on
// `t` for o.seconds, or until a pop finds the queue empty; `db` is the database `t` is on (for its
// counters). Throws what the operations throw: the first exception a client thread met, after
// stopping and joining the others.
Tally run_threads(const BenchOptions& o, const Database& db, Target& t, const std::string& op,
                  int threads);

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_BENCH_CLIENTS_H_
