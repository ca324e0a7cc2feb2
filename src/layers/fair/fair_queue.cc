#include "kvq/fair_queue.h"

#include <algorithm>

#include "kvq/error.h"
#include "layers/fair/fair_state.h"
#include "layers/item_keys.h"
#include "layers/work_items.h"

namespace kvq {

using detail::FairKeys;
using std::chrono::milliseconds;

namespace {

// When a push with `options` made just now becomes ready (unix us; 0 = now). Computed after the
// push, so it is never before the due time the tenant's queue gave the item.
std::int64_t ready_at(const PushOptions& options) {
  const std::int64_t now = detail::now_us();
  std::int64_t due =
      now + std::chrono::duration_cast<std::chrono::microseconds>(options.delay).count();
  if (options.not_before) {
    due = std::max<std::int64_t>(due, std::chrono::duration_cast<std::chrono::microseconds>(
                                          options.not_before->time_since_epoch())
                                          .count());
  }
  return due > now ? due : 0;
}

std::int64_t ready_after(milliseconds delay) {
  return delay.count() > 0 ? ready_at(PushOptions{delay, std::nullopt}) : 0;
}

}  // namespace

FairQueue::FairQueue(std::shared_ptr<Database> db, Subspace subspace, FairQueueOptions options)
    : state_(std::make_shared<detail::FairState>(std::move(db), std::move(subspace), options)) {}

void FairQueue::push(std::string_view tenant, std::string_view value, const PushOptions& options) {
  FairKeys::check_tenant(tenant);
  state_->run_marked([&](Transaction& tr) {
    push(tr, tenant, value, options);
    return true;
  });
}

void FairQueue::push(Transaction& tr, std::string_view tenant, std::string_view value,
                     const PushOptions& options) {
  FairKeys::check_tenant(tenant);
  if (detail::WorkItems::due_us(options)) {
    state_->tenant_queue(tenant).push(tr, value, options);  // delayed: through its timers
  } else {
    state_->push_ready(tr, tenant, value);
  }
  state_->pushed(tr, tenant, ready_at(options));
}

void FairQueue::push_batch(std::string_view tenant, const std::vector<std::string>& values) {
  FairKeys::check_tenant(tenant);
  if (values.empty()) return;
  state_->run_marked([&](Transaction& tr) {
    push_batch(tr, tenant, values);
    return true;
  });
}

void FairQueue::push_batch(Transaction& tr, std::string_view tenant,
                           const std::vector<std::string>& values) {
  FairKeys::check_tenant(tenant);
  if (values.empty()) return;
  for (const std::string& v : values) detail::check_item_value(v);
  // The wake-up before the items: a batch that does not fit throws with its items in `tr`, which
  // a caller may still commit; they must not be left without one.
  state_->pushed(tr, tenant, 0);
  state_->tenant_queue(tenant).push_batch(tr, values);
}

std::optional<FairItem> FairQueue::pop() { return state_->pop(); }
std::optional<FairItem> FairQueue::pop(Transaction& tr) { return state_->pop(tr); }
std::optional<FairItem> FairQueue::pop_wait(milliseconds timeout) {
  return state_->pop_wait(timeout);
}

std::optional<Lease> FairQueue::take(milliseconds vt) { return state_->take(vt); }
std::optional<Lease> FairQueue::take(Transaction& tr, milliseconds vt) {
  return state_->take(tr, vt);
}
std::optional<Lease> FairQueue::take_wait(milliseconds vt, milliseconds timeout) {
  return state_->take_wait(vt, timeout);
}

void FairQueue::ack(const Lease& lease) {
  FairKeys::check_tenant(lease.tenant);
  state_->run_marked([&](Transaction& tr) {
    ack(tr, lease);
    return true;
  });
}

void FairQueue::ack(Transaction& tr, const Lease& lease) {
  FairKeys::check_tenant(lease.tenant);
  const std::int64_t was_due = state_->tenant_work(lease.tenant).ack(tr, lease);
  state_->lease_ended(tr, lease, was_due, std::nullopt);
}

void FairQueue::nack(const Lease& lease, milliseconds delay, std::string_view reason) {
  FairKeys::check_tenant(lease.tenant);
  state_->run_marked([&](Transaction& tr) {
    nack(tr, lease, delay, reason);
    return true;
  });
}

void FairQueue::nack(Transaction& tr, const Lease& lease, milliseconds delay,
                     std::string_view reason) {
  FairKeys::check_tenant(lease.tenant);
  const std::int64_t was_due = state_->tenant_work(lease.tenant).nack(tr, lease, delay, reason);
  state_->lease_ended(tr, lease, was_due, ready_after(delay));
}

WallClock::time_point FairQueue::extend(const Lease& lease, milliseconds vt) {
  FairKeys::check_tenant(lease.tenant);
  return state_->run_marked([&](Transaction& tr) { return extend(tr, lease, vt); });
}

WallClock::time_point FairQueue::extend(Transaction& tr, const Lease& lease, milliseconds vt) {
  FairKeys::check_tenant(lease.tenant);
  std::int64_t was_due = 0;
  const WallClock::time_point deadline =
      state_->tenant_work(lease.tenant).extend(tr, lease, vt, &was_due);
  state_->leased_changed(
      tr, lease, was_due,
      std::chrono::duration_cast<std::chrono::microseconds>(deadline.time_since_epoch()).count(),
      lease.token);
  return deadline;
}

void FairQueue::set_weight(std::string_view tenant, std::int64_t weight) {
  FairKeys::check_tenant(tenant);
  if (weight < 1) throw Error(ErrorCode::kInvalidOptionValue, "fair queue: weight must be >= 1");
  state_->db().run([&](Transaction& tr) { state_->index().set_weight(tr, tenant, weight); });
}

std::int64_t FairQueue::weight(std::string_view tenant) {
  FairKeys::check_tenant(tenant);
  return state_->db().run([&](Transaction& tr) { return state_->index().weight(tr, tenant); });
}

Queue FairQueue::dead_letters(std::string_view tenant) const {
  FairKeys::check_tenant(tenant);
  return state_->tenant_queue(tenant).dead_letters();
}

std::vector<DeadLetter> FairQueue::peek_dead_letters(std::string_view tenant, int limit) {
  FairKeys::check_tenant(tenant);
  return state_->tenant_queue(tenant).peek_dead_letters(limit);
}

std::int64_t FairQueue::redrive(std::string_view tenant, std::int64_t n) {
  FairKeys::check_tenant(tenant);
  Queue queue = state_->tenant_queue(tenant);
  return detail::WorkItems::redrive_in_batches(n, [&](int batch) {
    return state_->run_marked([&](Transaction& tr) {
      const std::int64_t moved = queue.redrive(tr, batch);
      if (moved > 0) state_->pushed(tr, tenant, 0);
      return moved;
    });
  });
}

const Subspace& FairQueue::subspace() const { return state_->keys().space(); }
const FairQueueOptions& FairQueue::options() const { return state_->options(); }

}  // namespace kvq
