// The structures of `kvq simulate` (simulated_structure.h).
#include "tools/kvq/simulated_structure.h"

#include <random>
#include <stdexcept>
#include <utility>

namespace kvq::cli {
namespace {

using history::PopKind;
using std::chrono::milliseconds;

std::int64_t left_in(const QueueStats& s) {
  return s.ready + s.leased + s.delayed + s.dead_letters;
}

std::vector<std::string> values_of(const std::vector<Item>& items) {
  std::vector<std::string> values;
  for (const Item& i : items) values.push_back(i.value);
  return values;
}

PushOptions delayed_by(milliseconds delay) {
  PushOptions o;
  o.delay = delay;
  return o;
}

std::vector<Lease> as_leases(std::optional<Lease> l) {
  std::vector<Lease> out;
  if (l) out.push_back(std::move(*l));
  return out;
}

// What the three structures share: one object under ("sim"), and ack / nack / extend of its
// leases.
template <typename Layer, typename Options>
class TargetOn : public Target {
 public:
  TargetOn(std::shared_ptr<Database> db, Options o)
      : queue_(std::move(db), Subspace(Tuple().append("sim")), o) {}
  void ack(const Lease& lease) override { queue_.ack(lease); }
  void nack(const Lease& lease, milliseconds delay) override { queue_.nack(lease, delay); }
  void extend(const Lease& lease, milliseconds vt) override { queue_.extend(lease, vt); }

 protected:
  Layer queue_;
};

class QueueTarget final : public TargetOn<Queue, QueueOptions> {
 public:
  using TargetOn::TargetOn;

  void push(const std::vector<Item>& items, milliseconds delay) override {
    if (items.size() > 1) {
      queue_.push_batch(values_of(items));
    } else {
      queue_.push(items[0].value, delayed_by(delay));
    }
  }
  std::optional<std::string> pop(PopKind) override { return queue_.pop(); }
  std::optional<std::string> pop_wait(PopKind, milliseconds timeout) override {
    return queue_.pop_wait(timeout);
  }
  std::vector<Lease> take(PopKind, std::size_t n, milliseconds vt) override {
    return n == 1 ? as_leases(queue_.take(vt)) : queue_.take_batch(n, vt);
  }
  std::optional<Lease> take_wait(PopKind, milliseconds vt, milliseconds timeout) override {
    return queue_.take_wait(vt, timeout);
  }
  std::int64_t left() override { return left_in(queue_.stats()); }
};

class PriorityTarget final : public TargetOn<PriorityQueue, QueueOptions> {
 public:
  using TargetOn::TargetOn;

  void push(const std::vector<Item>& items, milliseconds delay) override {
    if (items.size() > 1) {
      std::vector<std::pair<std::string, std::int64_t>> batch;
      for (const Item& i : items) batch.emplace_back(i.value, i.priority);
      queue_.push_batch(batch);
    } else {
      queue_.push(items[0].value, items[0].priority, delayed_by(delay));
    }
  }
  std::optional<std::string> pop(PopKind kind) override {
    return kind == PopKind::kMax ? queue_.pop_max() : queue_.pop_min();
  }
  std::optional<std::string> pop_wait(PopKind kind, milliseconds timeout) override {
    return kind == PopKind::kMax ? queue_.pop_max_wait(timeout) : queue_.pop_min_wait(timeout);
  }
  std::vector<Lease> take(PopKind kind, std::size_t n, milliseconds vt) override {
    if (kind == PopKind::kMax) {
      return n == 1 ? as_leases(queue_.take_max(vt)) : queue_.take_max_batch(n, vt);
    }
    return n == 1 ? as_leases(queue_.take_min(vt)) : queue_.take_min_batch(n, vt);
  }
  std::optional<Lease> take_wait(PopKind kind, milliseconds vt, milliseconds timeout) override {
    return kind == PopKind::kMax ? queue_.take_max_wait(vt, timeout)
                                 : queue_.take_min_wait(vt, timeout);
  }
  std::int64_t left() override { return left_in(queue_.stats()); }
};

// A FairQueue has no take_batch: the clients take one at a time (n is 1).
class FairTarget final : public TargetOn<FairQueue, FairQueueOptions> {
 public:
  using TargetOn::TargetOn;

  void push(const std::vector<Item>& items, milliseconds delay) override {
    if (items.size() > 1) {
      queue_.push_batch(items[0].tenant, values_of(items));
    } else {
      queue_.push(items[0].tenant, items[0].value, delayed_by(delay));
    }
  }
  std::optional<std::string> pop(PopKind) override { return value_of(queue_.pop()); }
  std::optional<std::string> pop_wait(PopKind, milliseconds timeout) override {
    return value_of(queue_.pop_wait(timeout));
  }
  std::vector<Lease> take(PopKind, std::size_t, milliseconds vt) override {
    return as_leases(queue_.take(vt));
  }
  std::optional<Lease> take_wait(PopKind, milliseconds vt, milliseconds timeout) override {
    return queue_.take_wait(vt, timeout);
  }
  std::int64_t left() override {
    std::int64_t n = 0;
    for (const FairTenantStats& t : queue_.stats()) {
      n += t.ready + t.delayed + t.leased + t.dead_letters;
    }
    return n;
  }
  void set_weight(const std::string& tenant, std::int64_t weight) override {
    queue_.set_weight(tenant, weight);
  }

 private:
  static std::optional<std::string> value_of(std::optional<FairItem> item) {
    if (!item) return std::nullopt;
    return std::move(item->value);
  }
};

}  // namespace

void Target::set_weight(const std::string&, std::int64_t) {
  throw std::logic_error("set_weight: only a FairQueue has tenants");
}

const char* structure_name(Structure s) {
  switch (s) {
    case Structure::kQueue:
      return "Queue";
    case Structure::kPriorityQueue:
      return "PriorityQueue";
    case Structure::kFairQueue:
      return "FairQueue";
  }
  return "";
}

Structure structure_of(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ (kSeedMix >> 2));
  return static_cast<Structure>(rng() % 3);
}

QueueOptions queue_options(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ (kSeedMix >> 1));
  QueueOptions o;
  o.high_contention = rng() % 2 == 1;
  o.combine = rng() % 2 == 1;
  return o;
}

engine::FaultInjectionOptions fault_options(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ kSeedMix);
  auto rate = [&](double max) { return std::uniform_real_distribution<double>(0.0, max)(rng); };
  engine::FaultInjectionOptions o;
  o.unknown_not_applied = rate(0.1);
  o.unknown_applied = rate(0.1);
  o.conflict = rate(0.1);
  o.too_old = rate(0.02);
  o.seed = seed;
  return o;
}

int lease_limit_of(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ (kSeedMix >> 3));
  return rng() % 2 == 0 ? 0 : 1 + static_cast<int>(rng() % 2);
}

std::unique_ptr<Target> make_target(Structure s, std::shared_ptr<Database> db, QueueOptions o,
                                    int lease_limit) {
  switch (s) {
    case Structure::kQueue:
      return std::make_unique<QueueTarget>(std::move(db), o);
    case Structure::kPriorityQueue:
      return std::make_unique<PriorityTarget>(std::move(db), o);
    case Structure::kFairQueue:
      break;
  }
  FairQueueOptions fair;
  fair.combine = o.combine;
  fair.high_contention = o.high_contention;
  fair.contention = o.contention;
  fair.max_leased_per_tenant = lease_limit;
  return std::make_unique<FairTarget>(std::move(db), fair);
}

}  // namespace kvq::cli
