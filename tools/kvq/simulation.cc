// The workload and the check of one seed of `kvq simulate` (simulation.h).
#include "tools/kvq/simulation.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/random.h"
#include "common/simulated_clock.h"
#include "engine/testing/fault_injection.h"
#include "engine/testing/scheduling_engine.h"
#include "kvq/kvq.h"
#include "layers/combining/combiner.h"
#include "tools/kvq/fairness_probe.h"
#include "tools/kvq/held_leases.h"
#include "tools/kvq/history.h"
#include "tools/kvq/simulated_structure.h"

namespace kvq::cli {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t kMix = kSeedMix;
constexpr std::uint64_t kFnvOffset = 1469598103934665603ULL;
constexpr std::uint64_t kFnvPrime = 1099511628211ULL;

using history::PopKind;

// A random duration of [lo, hi] ms.
milliseconds between_ms(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return milliseconds(lo +
                      static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1)));
}

// The seed's world: the clock, the faulty scheduled database, the structure, and what happened.
// Only one client runs at a time (the clock's baton hands over under a mutex), so the history
// needs no lock of its own.
class World {
 public:
  explicit World(std::uint64_t seed)
      : seed_(seed),
        structure_(structure_of(seed)),
        faults_(std::make_shared<engine::FaultInjectionEngine>(
            std::make_shared<engine::SchedulingEngine>(open("memory:")->engine(), clock_),
            fault_options(seed))),
        db_(std::make_shared<Database>(faults_, "simulated-memory:")),
        lease_limit_(structure_ == Structure::kFairQueue ? lease_limit_of(seed) : 0),
        target_(make_target(structure_, db_, queue_options(seed), lease_limit_)) {
    result_.seed = seed;
    result_.structure = structure_name(structure_);
    result_.high_contention =
        structure_ != Structure::kFairQueue && queue_options(seed).high_contention;
    result_.combine = queue_options(seed).combine;
    result_.lease_limit = lease_limit_;
    mix((result_.high_contention ? 2 : 1) + (result_.combine ? 4 : 0) + 8 * lease_limit_);
    mix(static_cast<std::uint64_t>(structure_));
    common::seed_thread_random(seed);  // the drain runs on this thread
  }

  SeedResult run() {
    run_clients();
    drain();
    if (structure_ == Structure::kFairQueue) probe_fairness();
    check();
    return std::move(result_);
  }

 private:
  void run_clients() {
    std::mt19937_64 rng(seed_ * kMix + 1);
    // High-contention seeds get one client more, so that staged pops meet more often, and
    // combining seeds two more, so that more operations meet a group.
    result_.clients = (result_.high_contention ? 3 : 2) + (result_.combine ? 2 : 0) +
                      static_cast<std::int64_t>(rng() % 3);
    const common::SteadyTime start = clock_.steady_now();
    const combining::CombiningTotals before = combining::combining_totals();
    try {
      clock_.run(static_cast<int>(result_.clients), seed_, [this](int me) { client(me); });
    } catch (const std::exception& e) {
      problem(std::string("a client stopped: ") + e.what());
    }
    const combining::CombiningTotals after = combining::combining_totals();
    result_.combined = static_cast<std::int64_t>((after.requests - before.requests) -
                                                 (after.groups - before.groups));
    result_.steps = clock_.steps();
    result_.simulated_ms =
        std::chrono::duration_cast<milliseconds>(clock_.steady_now() - start).count();
    result_.unknown_applied = faults_->injected_applied();
    result_.unknown_not_applied = faults_->injected_not_applied();
    result_.conflicts = faults_->injected_conflicts();
    result_.too_old = faults_->injected_too_old();
  }

  void client(int me) {
    std::mt19937_64 rng(seed_ + kMix * (static_cast<std::uint64_t>(me) + 1));
    const int ops = 4 + static_cast<int>(rng() % 8);
    for (int i = 0; i < ops; ++i) {
      try {
        one_operation(me, rng);
      } catch (const std::exception& e) {
        problem("client " + std::to_string(me) + ": unexpected error: " + e.what());
        return;
      }
      if (rng() % 3 == 0) clock_.sleep_for(milliseconds(rng() % 3000));
    }
  }

  void one_operation(int me, std::mt19937_64& rng) {
    if (structure_ == Structure::kFairQueue && rng() % 12 == 0) {  // fairness_probe.h
      trace(me, "set_weight", set_random_weight(*target_, rng));
      ++result_.operations;
      ++result_.weights_set;
      return;
    }
    const std::uint64_t pick = rng() % 13;
    if (pick < 3) {
      push(me, {new_item(me, rng)});
    } else if (pick == 3) {
      std::vector<Item> items{new_item(me, rng)};
      for (std::uint64_t n = 1 + rng() % 3; n > 0; --n) {
        items.push_back(new_item(me, rng));
        items.back().tenant = items[0].tenant;  // a batch is one tenant's
      }
      push(me, items);
    } else if (pick == 4) {
      push_delayed(me, new_item(me, rng), between_ms(rng, 1, 5000));
    } else if (pick < 7) {
      pop(me, pop_kind(rng));
    } else if (pick == 7) {
      pop_wait(me, pop_kind(rng), between_ms(rng, 500, 5000));
    } else if (pick == 8) {
      take_wait(me, pop_kind(rng), rng);
    } else {
      const bool batch = pick == 12 && structure_ != Structure::kFairQueue;
      take(me, pop_kind(rng), rng, batch ? 2 + rng() % 2 : 1);
    }
  }

  // A PriorityQueue pops its low end three times in four; the others have one end.
  PopKind pop_kind(std::mt19937_64& rng) const {
    if (structure_ != Structure::kPriorityQueue) return PopKind::kFifo;
    return rng() % 4 == 0 ? PopKind::kMax : PopKind::kMin;
  }

  static const char* kind_suffix(PopKind kind) {
    return kind == PopKind::kMin ? "_min" : kind == PopKind::kMax ? "_max" : "";
  }

  // A new value of client `me`, with a priority of 0..3 (PriorityQueue: equal priorities meet
  // often) or one of three tenants (FairQueue).
  Item new_item(int me, std::mt19937_64& rng) {
    Item item;
    item.value = "c" + std::to_string(me) + "-" + std::to_string(next_value_[me]++);
    if (structure_ == Structure::kPriorityQueue) {
      item.priority = static_cast<std::int64_t>(rng() % 4);
    } else if (structure_ == Structure::kFairQueue) {
      item.tenant = "t" + std::to_string(rng() % 3);
    }
    return item;
  }

  void push(int me, const std::vector<Item>& items) {
    const std::int64_t start = tick();
    target_->push(items, milliseconds(0));
    const std::int64_t end = tick();
    for (const Item& i : items) record_push(me, "push", i, start, end);
    ++result_.operations;
  }

  // A push invisible for `delay`: recorded, but left out of the order and empty-pop checks
  // (it is not ready before its due time, and goes to the back when it comes due).
  void push_delayed(int me, const Item& item, milliseconds delay) {
    const std::int64_t start = tick();
    target_->push({item}, delay);
    record_push(me, "push_delayed", item, start, tick());
    delayed_.insert(item.value);
    ++result_.operations;
    ++result_.delayed_pushes;
  }

  void record_push(int me, std::string_view op, const Item& item, std::int64_t start,
                   std::int64_t end) {
    pushes_.push_back({item.value, item.priority, start, end});
    tenant_of_[item.value] = item.tenant;
    trace(me, op, item.value);
    ++result_.pushed;
  }

  // Runs a blocking wait; false if it ended in timed_out (its attempts could not commit in time:
  // nothing was delivered, and nothing is known about the queue, so no empty result is recorded).
  template <typename Wait>
  bool gave_up_waiting(int me, Wait&& wait) {
    try {
      wait();
      return true;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimedOut) throw;
      ++result_.operations;
      ++result_.waits;
      trace(me, "wait_timed_out", "");
      return false;
    }
  }

  void pop_wait(int me, PopKind kind, milliseconds timeout) {
    const std::int64_t start = tick();
    std::optional<std::string> v;
    if (!gave_up_waiting(me, [&] { v = target_->pop_wait(kind, timeout); })) return;
    check_not_leased(v);
    ++result_.operations;
    ++result_.waits;
    if (!v) ++result_.waits_empty;
    delivered(me, std::string("pop_wait") + kind_suffix(kind), kind, v, start, tick(),
              /*final=*/true);
    if (v) ++result_.popped;
  }

  void take_wait(int me, PopKind kind, std::mt19937_64& rng) {
    const milliseconds vt = between_ms(rng, 1000, 5000);
    const milliseconds timeout = between_ms(rng, 500, 5000);
    const std::int64_t start = tick();
    const common::SteadyTime started = clock_.steady_now();
    std::optional<Lease> l;
    if (!gave_up_waiting(me, [&] { l = target_->take_wait(kind, vt, timeout); })) return;
    const std::int64_t end = tick();
    if (l) hold(*l, started, vt, start, end);
    ++result_.operations;
    ++result_.waits;
    if (!l) ++result_.waits_empty;
    delivered(me, std::string("take_wait") + kind_suffix(kind), kind,
              l ? std::optional<std::string>(l->value) : std::nullopt, start, end,
              /*final=*/false);
    if (l) settle(me, rng, *l, vt);
  }

  void pop(int me, PopKind kind) {
    const std::int64_t start = tick();
    std::optional<std::string> v = target_->pop(kind);
    check_not_leased(v);
    ++result_.operations;
    delivered(me, std::string("pop") + kind_suffix(kind), kind, v, start, tick(), /*final=*/true);
    if (v) ++result_.popped;
  }

  void take(int me, PopKind kind, std::mt19937_64& rng, std::uint64_t n) {
    const milliseconds vt(1000 + static_cast<std::int64_t>(rng() % 4000));
    const std::int64_t start = tick();
    const common::SteadyTime started = clock_.steady_now();
    const std::vector<Lease> leases = target_->take(kind, n, vt);
    const std::int64_t end = tick();
    for (const Lease& l : leases) hold(l, started, vt, start, end);
    ++result_.operations;
    const std::string op = std::string("take") + kind_suffix(kind);
    if (leases.empty()) delivered(me, op, kind, std::nullopt, start, end, /*final=*/false);
    for (const Lease& l : leases) delivered(me, op, kind, l.value, start, end, /*final=*/false);
    for (const Lease& l : leases) settle(me, rng, l, vt);
  }

  // A delivery of `value` (if any) just returned: no lease on it may still hold.
  void check_not_leased(const std::optional<std::string>& value) {
    if (!value) return;
    if (auto why = leases_.check_delivery(*value, clock_.steady_now())) problem(*why);
  }

  // `lease` was just taken by a take that started at `started` (tick `start`) and returned at
  // tick `end`: checked (fencing, and the FairQueue's lease limit: fewer than lease_limit_ leases
  // of its tenant taken before it started still hold), then held.
  void hold(const Lease& lease, common::SteadyTime started, milliseconds vt, std::int64_t start,
            std::int64_t end) {
    check_not_leased(lease.value);
    if (lease_limit_ > 0) {
      ++result_.limited_takes;
      const int held = leases_.held_by_tenant(lease.tenant, start, clock_.steady_now());
      if (held >= lease_limit_) {
        problem("lease limit exceeded: took " + lease.value + " of tenant " + lease.tenant +
                " while " + std::to_string(held) + " of its leases held (limit " +
                std::to_string(lease_limit_) + ")");
      }
    }
    leases_.taken(lease, started, vt, end);
  }

  // Acks, nacks, acks late (the lease may have run out), extends then acks (perhaps late), or
  // abandons a lease (it runs out).
  void settle(int me, std::mt19937_64& rng, const Lease& lease, milliseconds vt) {
    const std::uint64_t pick = rng() % 7;
    if (pick == 3 || pick == 4) clock_.sleep_for(milliseconds(rng() % (2 * vt.count())));
    if (pick == 5) {
      trace(me, "abandon", lease.value);
      return;
    }
    const std::int64_t start = tick();
    try {
      ++result_.operations;
      if (pick == 6) extend(me, rng, lease, vt);
      leases_.released(lease);
      if (pick == 2 || pick == 4) {
        nack(me, rng, lease);
        return;
      }
      target_->ack(lease);
      ++result_.acked;
      delivered(me, "ack", PopKind::kFifo, lease.value, start, tick(), /*final=*/true,
                /*first_possible=*/false);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kLeaseLost) throw;
      ++result_.leases_lost;
      trace(me, "lease_lost", lease.value);
    }
  }

  // Extends `lease` at some time within `vt` to 1-5 s from then, then sleeps up to twice that
  // (the ack after it may find the lease gone). Throws lease_lost if it ran out first.
  void extend(int me, std::mt19937_64& rng, const Lease& lease, milliseconds vt) {
    clock_.sleep_for(milliseconds(rng() % vt.count()));
    const milliseconds longer = between_ms(rng, 1000, 5000);
    const common::SteadyTime started = clock_.steady_now();
    target_->extend(lease, longer);
    leases_.extended(lease, started, longer);
    ++result_.extended;
    trace(me, "extend", lease.value);
    clock_.sleep_for(milliseconds(rng() % (2 * longer.count())));
  }

  // Nacks `lease`, half the time with a delay of up to 3 s (the item goes to the back when due;
  // only first deliveries are ordered, so the checks need no change).
  void nack(int me, std::mt19937_64& rng, const Lease& lease) {
    const milliseconds delay = rng() % 2 == 0 ? milliseconds(0) : between_ms(rng, 1, 3000);
    target_->nack(lease, delay);
    if (delay.count() > 0) ++result_.delayed_nacks;
    trace(me, delay.count() > 0 ? "nack_delayed" : "nack", lease.value);
  }

  // Records a delivery attempt: `value` (nullopt: the operation found nothing) was returned by
  // a pop or take from end `kind`, or acked. `final`: it is the value's delivery (pop, ack).
  void delivered(int me, std::string_view op, PopKind kind, const std::optional<std::string>& value,
                 std::int64_t start, std::int64_t end, bool final, bool first_possible = true) {
    trace(me, op, value.value_or("(none)"));
    if (!value) {
      // Under a lease limit a tenant at its limit is out of turn for pops and takes alike
      // (FairQueueOptions::max_leased_per_tenant) while its items are ready: empty answers are
      // not checked then.
      if (lease_limit_ == 0) firsts_.push_back({kind, std::nullopt, start, end});
      return;
    }
    if (finals_[*value] > 0) problem("delivered again after its delivery: " + *value);
    if (first_possible && seen_.insert(*value).second) {
      firsts_.push_back({kind, *value, start, end});
    } else if (first_possible) {
      ++result_.redeliveries;
    }
    if (final) ++finals_[*value];
  }

  // The end of the structure the drain pops.
  PopKind drain_kind() const {
    return structure_ == Structure::kPriorityQueue ? PopKind::kMin : PopKind::kFifo;
  }

  // No faults, an hour later (every lease has run out): pops until the structure is empty.
  void drain() {
    faults_->set_options({});
    clock_.advance(std::chrono::hours(1));
    try {
      for (;;) {
        const std::int64_t start = tick();
        std::optional<std::string> v = target_->pop(drain_kind());
        ++result_.operations;
        delivered(-1, "drain", drain_kind(), v, start, tick(), /*final=*/true);
        if (!v) break;
        ++result_.popped;
      }
      if (const std::int64_t left = target_->left(); left != 0) {
        problem("the drained " + result_.structure + " is not empty: " + std::to_string(left) +
                " items left (ready, delayed, leased or dead letters)");
      }
    } catch (const std::exception& e) {
      problem(std::string("drain: unexpected error: ") + e.what());
    }
  }

  // FairQueue, after the drain: fairness_probe.h.
  void probe_fairness() {
    try {
      ProbeResult r = cli::probe_fairness(*target_, seed_);
      for (const std::string& v : r.popped) trace(-1, "probe", v);
      result_.operations += r.pushed + static_cast<std::int64_t>(r.popped.size()) + 1;
      result_.fairness_pops += static_cast<std::int64_t>(r.popped.size());
      for (std::string& p : r.problems) problem(p);
    } catch (const std::exception& e) {
      problem(std::string("fairness probe: unexpected error: ") + e.what());
    }
  }

  // The order checks over the items pushed without a delay (history.h): for a Queue, FIFO over
  // first deliveries; for a PriorityQueue, priority order of every pop_min / pop_max (and takes)
  // against the items ready throughout, and FIFO within one priority over first deliveries from
  // the low end; for a FairQueue, FIFO within each tenant. Empty pops: all three.
  void check_order() {
    std::vector<history::Push> pushes;
    for (const history::Push& p : pushes_) {
      if (!delayed_.contains(p.value)) pushes.push_back(p);
    }
    std::vector<history::Pop> firsts;
    for (const history::Pop& p : firsts_) {
      if (!p.value || !delayed_.contains(*p.value)) firsts.push_back(p);
    }
    switch (structure_) {
      case Structure::kQueue:
        report(history::check(pushes, firsts));
        break;
      case Structure::kPriorityQueue:
        report(history::check(pushes, firsts));  // no kFifo pop: priorities and empty pops
        report(history::check_fifo_within(
            pushes, firsts, [](const history::Push& p) { return std::to_string(p.priority); }));
        break;
      case Structure::kFairQueue:
        // As pop_min over one priority (every push has priority 0), the priority rule is void:
        // this checks the matching and the empty pops.
        for (history::Pop& p : firsts) p.kind = PopKind::kMin;
        report(history::check(pushes, firsts));
        report(history::check_fifo_within(
            pushes, firsts, [&](const history::Push& p) { return tenant_of_[p.value]; }));
        break;
    }
  }

  void report(const history::Result& r) {
    for (const std::string& p : r.problems) problem(p);
  }
  void report(const std::vector<history::Result>& results) {
    for (const history::Result& r : results) report(r);
  }

  void check() {
    check_order();
    for (const history::Push& p : pushes_) {
      const int n = finals_[p.value];
      if (n != 1) problem(p.value + " delivered " + std::to_string(n) + " times");
    }
    std::unordered_set<std::string> pushed;
    for (const history::Push& p : pushes_) pushed.insert(p.value);
    for (const auto& [value, n] : finals_) {
      if (n > 0 && !pushed.contains(value)) problem("delivered a value never pushed: " + value);
    }
    mix(static_cast<std::uint64_t>(result_.simulated_ms));
    mix(result_.steps);
    result_.digest = digest_;
  }

  std::int64_t tick() { return ++tick_; }

  void trace(int me, std::string_view op, std::string_view value) {
    mix(static_cast<std::uint64_t>(me) + 1);
    for (char c : op) mix(static_cast<unsigned char>(c));
    for (char c : value) mix(static_cast<unsigned char>(c));
    mix(static_cast<std::uint64_t>(tick_));
  }

  void mix(std::uint64_t x) { digest_ = (digest_ ^ x) * kFnvPrime; }

  void problem(const std::string& what) { result_.problems.push_back(what); }

  const std::uint64_t seed_;
  const Structure structure_;
  common::SimulatedClock clock_;
  common::ScopedClock installed_{clock_};
  std::shared_ptr<engine::FaultInjectionEngine> faults_;
  std::shared_ptr<Database> db_;
  const int lease_limit_;  // FairQueueOptions::max_leased_per_tenant (0: none, or not a FairQueue)
  std::unique_ptr<Target> target_;
  HeldLeases leases_;
  SeedResult result_;
  std::int64_t tick_ = 0;
  std::uint64_t digest_ = kFnvOffset;
  std::unordered_map<int, int> next_value_;
  std::vector<history::Push> pushes_;
  std::unordered_map<std::string, std::string> tenant_of_;  // value -> tenant (FairQueue)
  std::vector<history::Pop> firsts_;
  std::unordered_map<std::string, int> finals_;
  std::unordered_set<std::string> seen_;
  std::unordered_set<std::string> delayed_;  // values pushed with a delay
};

}  // namespace

SeedResult simulate_seed(std::uint64_t seed) { return World(seed).run(); }

}  // namespace kvq::cli
