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
        queue_(db_, Subspace(Tuple().append("sim"))) {
    result_.seed = seed;
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
    result_.clients = 2 + static_cast<std::int64_t>(rng() % 3);
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
    const std::uint64_t pick = rng() % 10;
    if (pick < 3) {
      push(me, {new_value(me)});
    } else if (pick == 3) {
      std::vector<std::string> values;
      for (std::uint64_t n = 2 + rng() % 3; n > 0; --n) values.push_back(new_value(me));
      push(me, values);
    } else if (pick < 6) {
      pop(me);
    } else {
      take(me, rng, pick == 9 ? 2 + rng() % 2 : 1);
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
        queue_.nack(lease);
        trace(me, "nack", lease.value);
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

  void check() {
    const history::Result order = history::check(pushes_, firsts_);
    for (const std::string& p : order.problems) problem(p);
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
};

}  // namespace

SeedResult simulate_seed(std::uint64_t seed) { return World(seed).run(); }

}  // namespace kvq::cli
