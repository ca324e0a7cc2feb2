// The workload and the check of one seed of `kvq simulate` (simulation.h).
#include "tools/kvq/simulation.h"

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "common/random.h"
#include "common/simulated_clock.h"
#include "engine/testing/fault_injection.h"
#include "engine/testing/scheduling_engine.h"
#include "kvq/kvq.h"
#include "tools/kvq/history.h"

namespace kvq::cli {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t kMix = 0x9e3779b97f4a7c15ULL;
constexpr std::uint64_t kFnvOffset = 1469598103934665603ULL;
constexpr std::uint64_t kFnvPrime = 1099511628211ULL;

// The fault rates of a seed: each kind up to 10% of commits (too_old up to 2% of reads).
engine::FaultInjectionOptions fault_options(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ kMix);
  auto rate = [&](double max) { return std::uniform_real_distribution<double>(0.0, max)(rng); };
  engine::FaultInjectionOptions o;
  o.unknown_not_applied = rate(0.1);
  o.unknown_applied = rate(0.1);
  o.conflict = rate(0.1);
  o.too_old = rate(0.02);
  o.seed = seed;
  return o;
}

// Plain or high-contention pops, from the seed.
QueueOptions queue_options(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ (kMix >> 1));
  QueueOptions o;
  o.high_contention = rng() % 2 == 1;
  return o;
}

// A random duration of [lo, hi] ms.
milliseconds between_ms(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return milliseconds(lo +
                      static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1)));
}

// The seed's world: the clock, the faulty scheduled database, the queue, and what happened.
// Only one client runs at a time (the clock's baton hands over under a mutex), so the history
// needs no lock of its own.
class World {
 public:
  explicit World(std::uint64_t seed)
      : seed_(seed),
        faults_(std::make_shared<engine::FaultInjectionEngine>(
            std::make_shared<engine::SchedulingEngine>(open("memory:")->engine(), clock_),
            fault_options(seed))),
        db_(std::make_shared<Database>(faults_, "simulated-memory:")),
        queue_(db_, Subspace(Tuple().append("sim")), queue_options(seed)) {
    result_.seed = seed;
    result_.high_contention = queue_options(seed).high_contention;
    mix(result_.high_contention ? 2 : 1);
    common::seed_thread_random(seed);  // the drain runs on this thread
  }

  SeedResult run() {
    run_clients();
    drain();
    check();
    return std::move(result_);
  }

 private:
  void run_clients() {
    std::mt19937_64 rng(seed_ * kMix + 1);
    // High-contention seeds get one client more, so that staged pops meet more often.
    result_.clients = (result_.high_contention ? 3 : 2) + static_cast<std::int64_t>(rng() % 3);
    const common::SteadyTime start = clock_.steady_now();
    try {
      clock_.run(static_cast<int>(result_.clients), seed_, [this](int me) { client(me); });
    } catch (const std::exception& e) {
      problem(std::string("a client stopped: ") + e.what());
    }
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
    const std::uint64_t pick = rng() % 13;
    if (pick < 3) {
      push(me, {new_value(me)});
    } else if (pick == 3) {
      std::vector<std::string> values;
      for (std::uint64_t n = 2 + rng() % 3; n > 0; --n) values.push_back(new_value(me));
      push(me, values);
    } else if (pick == 4) {
      push_delayed(me, between_ms(rng, 1, 5000));
    } else if (pick < 7) {
      pop(me);
    } else if (pick == 7) {
      pop_wait(me, between_ms(rng, 500, 5000));
    } else if (pick == 8) {
      take_wait(me, rng);
    } else {
      take(me, rng, pick == 12 ? 2 + rng() % 2 : 1);
    }
  }

  std::string new_value(int me) {
    return "c" + std::to_string(me) + "-" + std::to_string(next_value_[me]++);
  }

  void push(int me, const std::vector<std::string>& values) {
    const std::int64_t start = tick();
    if (values.size() == 1) {
      queue_.push(values[0]);
    } else {
      queue_.push_batch(values);
    }
    const std::int64_t end = tick();
    for (const std::string& v : values) {
      pushes_.push_back({v, 0, start, end});
      trace(me, "push", v);
    }
    ++result_.operations;
    result_.pushed += static_cast<std::int64_t>(values.size());
  }

  // A push invisible for `delay`: recorded, but left out of the order and empty-pop checks
  // (it is not ready before its due time, and goes to the back when it comes due).
  void push_delayed(int me, milliseconds delay) {
    const std::string v = new_value(me);
    const std::int64_t start = tick();
    PushOptions o;
    o.delay = delay;
    queue_.push(v, o);
    pushes_.push_back({v, 0, start, tick()});
    delayed_.insert(v);
    trace(me, "push_delayed", v);
    ++result_.operations;
    ++result_.pushed;
    ++result_.delayed_pushes;
  }

  void pop_wait(int me, milliseconds timeout) {
    const std::int64_t start = tick();
    std::optional<std::string> v = queue_.pop_wait(timeout);
    ++result_.operations;
    ++result_.waits;
    if (!v) ++result_.waits_empty;
    delivered(me, "pop_wait", v, start, tick(), /*final=*/true);
    if (v) ++result_.popped;
  }

  void take_wait(int me, std::mt19937_64& rng) {
    const milliseconds vt = between_ms(rng, 1000, 5000);
    const milliseconds timeout = between_ms(rng, 500, 5000);
    const std::int64_t start = tick();
    std::optional<Lease> l = queue_.take_wait(vt, timeout);
    const std::int64_t end = tick();
    ++result_.operations;
    ++result_.waits;
    if (!l) ++result_.waits_empty;
    delivered(me, "take_wait", l ? std::optional<std::string>(l->value) : std::nullopt, start, end,
              /*final=*/false);
    if (l) settle(me, rng, *l, vt);
  }

  void pop(int me) {
    const std::int64_t start = tick();
    std::optional<std::string> v = queue_.pop();
    ++result_.operations;
    delivered(me, "pop", v, start, tick(), /*final=*/true);
    if (v) ++result_.popped;
  }

  void take(int me, std::mt19937_64& rng, std::uint64_t n) {
    const milliseconds vt(1000 + static_cast<std::int64_t>(rng() % 4000));
    const std::int64_t start = tick();
    std::vector<Lease> leases;
    if (n == 1) {
      if (std::optional<Lease> l = queue_.take(vt)) leases.push_back(std::move(*l));
    } else {
      leases = queue_.take_batch(n, vt);
    }
    const std::int64_t end = tick();
    ++result_.operations;
    if (leases.empty()) delivered(me, "take", std::nullopt, start, end, /*final=*/false);
    for (const Lease& l : leases) delivered(me, "take", l.value, start, end, /*final=*/false);
    for (const Lease& l : leases) settle(me, rng, l, vt);
  }

  // Acks, nacks, acks late (the lease may have run out) or abandons a lease (it runs out).
  void settle(int me, std::mt19937_64& rng, const Lease& lease, milliseconds vt) {
    const std::uint64_t pick = rng() % 6;
    if (pick == 3 || pick == 4) clock_.sleep_for(milliseconds(rng() % (2 * vt.count())));
    if (pick == 5) {
      trace(me, "abandon", lease.value);
      return;
    }
    const std::int64_t start = tick();
    try {
      ++result_.operations;
      if (pick == 2 || pick == 4) {
        nack(me, rng, lease);
        return;
      }
      queue_.ack(lease);
      ++result_.acked;
      delivered(me, "ack", lease.value, start, tick(), /*final=*/true, /*first_possible=*/false);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kLeaseLost) throw;
      ++result_.leases_lost;
      trace(me, "lease_lost", lease.value);
    }
  }

  // Nacks `lease`, half the time with a delay of up to 3 s (the item goes to the back when due;
  // only first deliveries are ordered, so the checks need no change).
  void nack(int me, std::mt19937_64& rng, const Lease& lease) {
    const milliseconds delay = rng() % 2 == 0 ? milliseconds(0) : between_ms(rng, 1, 3000);
    queue_.nack(lease, delay);
    if (delay.count() > 0) ++result_.delayed_nacks;
    trace(me, delay.count() > 0 ? "nack_delayed" : "nack", lease.value);
  }

  // Records a delivery attempt: `value` (nullopt: the operation found nothing) was returned by
  // a pop or take, or acked. `final`: it is the value's delivery (pop, ack).
  void delivered(int me, std::string_view op, const std::optional<std::string>& value,
                 std::int64_t start, std::int64_t end, bool final, bool first_possible = true) {
    trace(me, op, value.value_or("(none)"));
    if (!value) {
      firsts_.push_back({history::PopKind::kFifo, std::nullopt, start, end});
      return;
    }
    if (finals_[*value] > 0) problem("delivered again after its delivery: " + *value);
    if (first_possible && seen_.insert(*value).second) {
      firsts_.push_back({history::PopKind::kFifo, *value, start, end});
    } else if (first_possible) {
      ++result_.redeliveries;
    }
    if (final) ++finals_[*value];
  }

  // No faults, an hour later (every lease has run out): pops until the queue is empty.
  void drain() {
    faults_->set_options({});
    clock_.advance(std::chrono::hours(1));
    try {
      for (;;) {
        const std::int64_t start = tick();
        std::optional<std::string> v = queue_.pop();
        ++result_.operations;
        delivered(-1, "drain", v, start, tick(), /*final=*/true);
        if (!v) break;
        ++result_.popped;
      }
      const QueueStats s = queue_.stats();
      if (s.ready + s.leased + s.delayed + s.dead_letters != 0) {
        problem("the drained queue is not empty: " + std::to_string(s.leased) + " leased, " +
                std::to_string(s.dead_letters) + " dead letters");
      }
    } catch (const std::exception& e) {
      problem(std::string("drain: unexpected error: ") + e.what());
    }
  }

  // The order and empty-pop checks over the items pushed without a delay.
  void check_order() {
    std::vector<history::Push> pushes;
    for (const history::Push& p : pushes_) {
      if (!delayed_.contains(p.value)) pushes.push_back(p);
    }
    std::vector<history::Pop> firsts;
    for (const history::Pop& p : firsts_) {
      if (!p.value || !delayed_.contains(*p.value)) firsts.push_back(p);
    }
    const history::Result order = history::check(pushes, firsts);
    for (const std::string& p : order.problems) problem(p);
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
  common::SimulatedClock clock_;
  common::ScopedClock installed_{clock_};
  std::shared_ptr<engine::FaultInjectionEngine> faults_;
  std::shared_ptr<Database> db_;
  Queue queue_;
  SeedResult result_;
  std::int64_t tick_ = 0;
  std::uint64_t digest_ = kFnvOffset;
  std::unordered_map<int, int> next_value_;
  std::vector<history::Push> pushes_;
  std::vector<history::Pop> firsts_;
  std::unordered_map<std::string, int> finals_;
  std::unordered_set<std::string> seen_;
  std::unordered_set<std::string> delayed_;  // values pushed with a delay
};

}  // namespace

SeedResult simulate_seed(std::uint64_t seed) { return World(seed).run(); }

}  // namespace kvq::cli
