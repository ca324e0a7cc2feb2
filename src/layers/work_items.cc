#include "layers/work_items.h"

#include <algorithm>

#include "common/bytes.h"
#include "common/random.h"
#include "kvq/error.h"
#include "kvq/tuple.h"
#include "layers/contention/end_windows.h"
#include "layers/contention/marked_run.h"
#include "layers/fitting.h"
#include "layers/item_keys.h"
#include "layers/lease_token.h"

namespace kvq::detail {
namespace {

constexpr std::string_view kExpiredReason = "visibility timeout expired";
constexpr std::string_view kNackedReason = "nacked";
// The engine operations a redriven letter adds at most: its clear and its new item's set (etcd
// counts max(compares, writes); the letter's read adds one compare).
constexpr std::size_t kRedriveOperations = 2;

int validated_max_attempts(const QueueOptions& options) {
  if (options.max_attempts < 0) {
    throw Error(ErrorCode::kInvalidOptionValue, "queue: max_attempts must be >= 0");
  }
  return options.max_attempts;
}

void check_redrive_count(std::int64_t n) {
  if (n < 0) throw Error(ErrorCode::kInvalidOptionValue, "queue: redrive of a negative count");
}

// Throws invalid_option_value naming `what` if `span` is longer than kMaxWorkDuration. Compared
// in `span`'s own unit or a finer one: milliseconds::max() must not be converted to microseconds.
template <typename Span>
void check_at_most_max_work_duration(Span span, const char* what) {
  if (span <= kMaxWorkDuration) return;
  throw Error(ErrorCode::kInvalidOptionValue,
              std::string("queue: ") + what + " must be at most 10 years (315360000000 ms)");
}

std::int64_t positive_us(std::chrono::milliseconds vt) {
  if (vt.count() <= 0) {
    throw Error(ErrorCode::kInvalidOptionValue, "queue: the visibility timeout must be > 0");
  }
  check_at_most_max_work_duration(vt, "the visibility timeout");
  return std::chrono::duration_cast<std::chrono::microseconds>(vt).count();
}

std::int64_t delay_us(std::chrono::milliseconds delay) {
  if (delay.count() < 0) throw Error(ErrorCode::kInvalidOptionValue, "queue: negative delay");
  check_at_most_max_work_duration(delay, "the delay");
  return std::chrono::duration_cast<std::chrono::microseconds>(delay).count();
}

WallClock::time_point to_time(std::int64_t unix_us) {
  return WallClock::time_point(
      std::chrono::duration_cast<WallClock::duration>(std::chrono::microseconds(unix_us)));
}

}  // namespace

WorkItems::WorkItems(std::shared_ptr<Database> db, const Subspace& subspace,
                     const QueueOptions& options, bool prioritized, contention::ItemRange items)
    : db_(std::move(db)),
      subspace_(subspace),
      prioritized_(prioritized),
      max_attempts_(validated_max_attempts(options)),
      items_(std::move(items)),
      keys_(subspace.subspace(Tuple().append("kvq"))),
      tag_(queue_tag(subspace, prioritized)),
      dead_(keys_.dead()),
      markers_(db_, subspace.subspace(Tuple().append("kvq")), options.marker_ttl) {}

// ---- counters and timers --------------------------------------------------------------------

void WorkItems::add(Transaction& tr, const std::string& key, std::int64_t delta) {
  tr.atomic_add(key, delta);
}

std::int64_t WorkItems::counter(Transaction& tr, const std::string& key) {
  auto v = tr.get(key, /*snapshot=*/true);
  return v ? common::decode_le64(*v) : 0;
}

std::string WorkItems::held(std::string_view base) const {
  return items_.held_prefix + std::string(base);
}

bool WorkItems::exhausted(int attempts) const {
  return max_attempts_ > 0 && attempts >= max_attempts_;
}

contention::OwnedRead WorkItems::due_read(std::int64_t now_us) const {
  // A snapshot read: pops and takes do not conflict with leases being taken or acked meanwhile;
  // the read conflict goes on each timer moved, so two moves of one timer, or a move and an ack of
  // one lease, conflict.
  return {keys_.due_range().begin,
          keys_.due_before(now_us),
          {.limit = kReleasePerOp, .snapshot = true}};
}

void WorkItems::release_due(Transaction& tr, std::int64_t now_us) {
  const contention::OwnedRead read = due_read(now_us);
  std::vector<Timer> timers;
  std::vector<std::string> values;
  for (KeyValue& kv : tr.get_range(read.begin, read.end, read.options)) {
    tr.add_read_conflict_key(kv.key);
    tr.clear(kv.key);
    timers.push_back(keys_.parse_due(kv.key));
    values.push_back(std::move(kv.value));
  }
  place_delayed(tr, timers);
  for (std::size_t i = 0; i < timers.size(); ++i) release(tr, timers[i], values[i]);
}

void WorkItems::place_delayed(Transaction& tr, std::vector<Timer>& timers) {
  std::vector<Timer*> unplaced;
  std::vector<std::int64_t> priorities;
  std::vector<std::string> randoms;
  for (Timer& t : timers) {
    if (t.kind != Timer::kDelayed || !t.base.empty()) continue;
    unplaced.push_back(&t);
    priorities.push_back(t.priority);
    randoms.push_back(t.id);
  }
  if (unplaced.empty()) return;
  const std::vector<std::string> keys =
      fresh_item_keys(tr, subspace_, items_, prioritized_, priorities, randoms);
  for (std::size_t i = 0; i < unplaced.size(); ++i) {
    unplaced[i]->base = keys[i].substr(subspace_.key().size());
  }
}

void WorkItems::release(Transaction& tr, const Timer& timer, const std::string& value) {
  if (timer.kind == Timer::kDelayed) {
    add(tr, keys_.delayed(), -1);
    to_ready(tr, timer, value);
    return;
  }
  tr.clear(keys_.taken(timer.id));
  tr.clear(held(timer.base));
  add(tr, keys_.leased(), -1);
  if (exhausted(timer.attempts)) {
    dead_.add(tr, value, timer.attempts, timer.priority, kExpiredReason);
  } else {
    to_ready(tr, timer, value);
  }
}

// A lease's item goes back to its own key (its place in line); a delayed item to the key
// place_delayed gave it.
void WorkItems::to_ready(Transaction& tr, const Timer& timer, const std::string& value) {
  tr.set(item_key_with_attempts(subspace_, timer.base, timer.attempts, timer.tail), value);
  contention::add_size(tr, items_, 1);
}

// ---- leases ---------------------------------------------------------------------------------

std::int64_t WorkItems::lease_us(std::chrono::milliseconds vt) { return positive_us(vt); }

Lease WorkItems::lease(Transaction& tr, KeyValue& kv, std::int64_t vt_us) {
  const ItemKey item = parse_item_key(subspace_, kv.key, prioritized_);
  const Timer timer{now_us() + vt_us, common::random_bytes(kTakeIdSize),
                    Timer::kLease,    item.attempts + 1,
                    item.priority,    item.base,
                    item.tail};
  const std::string due_key = keys_.due(timer);
  tr.clear(kv.key);
  tr.set(due_key, kv.value);
  tr.set(keys_.taken(timer.id), due_key);
  tr.set(held(item.base), "");
  return Lease{std::move(kv.value), make_token(tag_, timer.id),
               timer.attempts,      to_time(timer.due_us),
               item.priority,       std::string()};
}

void WorkItems::count_taken(Transaction& tr, std::size_t n) {
  if (n > 0) add(tr, keys_.leased(), static_cast<std::int64_t>(n));
}

contention::OwnedRead WorkItems::next_due_read() const {
  return {keys_.due_range().begin, keys_.due_range().end, {.limit = 1, .snapshot = true}};
}

std::optional<std::int64_t> WorkItems::next_due_us(Transaction& tr) {
  const contention::OwnedRead next = next_due_read();
  auto first = tr.get_range(next.begin, next.end, next.options);
  if (first.empty()) return std::nullopt;
  return keys_.parse_due(first[0].key).due_us;
}

// The lease's fence (a non-snapshot read: conflicts with its move back and with other acks), its
// timer and, if `with_value`, the item. Throws lease_lost if the fence is gone.
WorkItems::Held WorkItems::hold(Transaction& tr, const Lease& lease, bool with_value) {
  Held h;
  h.fence = keys_.taken(token_take_id(lease.token, tag_));
  auto due_key = tr.get(h.fence);
  if (!due_key) {
    throw Error(ErrorCode::kLeaseLost,
                "queue: the lease ran out and its item was moved back, or it was acked or nacked");
  }
  h.due_key = std::move(*due_key);
  h.timer = keys_.parse_due(h.due_key);
  if (with_value) {
    auto value = tr.get(h.due_key, /*snapshot=*/true);
    if (!value) throw Error(ErrorCode::kCorruption, "queue: a lease without its item");
    h.value = std::move(*value);
  }
  return h;
}

std::int64_t WorkItems::ack(Transaction& tr, const Lease& lease) {
  const Held h = hold(tr, lease, false);
  tr.clear(h.fence);
  tr.clear(h.due_key);
  tr.clear(held(h.timer.base));
  add(tr, keys_.leased(), -1);
  return h.timer.due_us;
}

void WorkItems::ack(const Lease& lease) {
  run_marked(*db_, markers_, [&](Transaction& tr) {
    ack(tr, lease);
    return 0;
  });
}

std::int64_t WorkItems::nack(Transaction& tr, const Lease& lease, std::chrono::milliseconds delay,
                             std::string_view reason) {
  const std::int64_t later_us = delay_us(delay);
  DeadLetters::check_reason(reason);
  const Held h = hold(tr, lease, true);
  tr.clear(h.fence);
  tr.clear(h.due_key);
  tr.clear(held(h.timer.base));
  add(tr, keys_.leased(), -1);
  if (exhausted(h.timer.attempts)) {
    dead_.add(tr, h.value, h.timer.attempts, h.timer.priority,
              reason.empty() ? kNackedReason : reason);
  } else if (later_us == 0) {
    to_ready(tr, h.timer, h.value);
  } else {
    const Timer later{now_us() + later_us, new_item_random(), Timer::kDelayed,
                      h.timer.attempts,    h.timer.priority,  "",
                      h.timer.tail};
    tr.set(keys_.due(later), h.value);
    add(tr, keys_.delayed(), 1);
  }
  return h.timer.due_us;
}

void WorkItems::nack(const Lease& lease, std::chrono::milliseconds delay, std::string_view reason) {
  delay_us(delay);
  DeadLetters::check_reason(reason);
  run_marked(*db_, markers_, [&](Transaction& tr) {
    nack(tr, lease, delay, reason);
    return 0;
  });
}

WallClock::time_point WorkItems::extend(Transaction& tr, const Lease& lease,
                                        std::chrono::milliseconds vt, std::int64_t* was_due_us) {
  const std::int64_t vt_us = positive_us(vt);
  const Held h = hold(tr, lease, true);
  if (was_due_us) *was_due_us = h.timer.due_us;
  Timer timer = h.timer;
  timer.due_us = now_us() + vt_us;
  const std::string due_key = keys_.due(timer);
  tr.clear(h.due_key);
  tr.set(due_key, h.value);
  tr.set(h.fence, due_key);
  return to_time(timer.due_us);
}

WallClock::time_point WorkItems::extend(const Lease& lease, std::chrono::milliseconds vt) {
  positive_us(vt);
  return run_marked(*db_, markers_, [&](Transaction& tr) { return extend(tr, lease, vt); });
}

// ---- delayed pushes -------------------------------------------------------------------------

std::optional<std::int64_t> WorkItems::due_us(const PushOptions& options) {
  const std::int64_t now = now_us();
  std::int64_t due = now + delay_us(options.delay);
  if (options.not_before) {
    const std::int64_t not_before_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                           options.not_before->time_since_epoch())
                                           .count();
    check_at_most_max_work_duration(std::chrono::microseconds(not_before_us - now),
                                    "not_before, from now,");
    due = std::max(due, not_before_us);
  }
  if (due <= now) return std::nullopt;
  return due;
}

void WorkItems::push_delayed(Transaction& tr, std::string_view value, std::int64_t priority,
                             std::int64_t due, const std::string& id) {
  check_item_value(value);
  tr.set(keys_.due(Timer{due, id, Timer::kDelayed, 0, priority, "", ""}), value);
  add(tr, keys_.delayed(), 1);
}

void WorkItems::push_delayed(Transaction& tr, std::string_view value, std::int64_t priority,
                             std::int64_t due) {
  push_delayed(tr, value, priority, due, new_item_random());
}

void WorkItems::push_delayed(std::string_view value, std::int64_t priority, std::int64_t due) {
  const std::string id = new_item_random();  // chosen once, outside the retry loop
  run_marked(*db_, markers_, [&](Transaction& tr) {
    push_delayed(tr, value, priority, due, id);
    return 0;
  });
}

// ---- dead letters, stats, clear -------------------------------------------------------------

std::int64_t WorkItems::redrive_in_batches(std::int64_t n,
                                           const std::function<std::int64_t(int)>& move_batch) {
  check_redrive_count(n);
  std::int64_t moved = 0;
  while (moved < n) {
    const int batch = static_cast<int>(std::min<std::int64_t>(n - moved, kRedriveBatch));
    const std::int64_t done = move_batch(batch);
    if (done == 0) break;  // (fewer than the batch: no more, or no more that fit; ask again)
    moved += done;
  }
  return moved;
}

std::int64_t WorkItems::redrive(std::int64_t n) {
  return redrive_in_batches(n, [&](int batch) {
    return run_marked(*db_, markers_, [&](Transaction& tr) { return redrive(tr, batch); });
  });
}

std::int64_t WorkItems::redrive(Transaction& tr, std::int64_t n) {
  check_redrive_count(n);
  // As many as fit in what is left of the transaction's limits (at least one): its bytes, and on
  // an engine that counts operations, kRedriveOperations a letter.
  const TransactionUsage used = tr.usage();
  const TransactionLimits limits = db_->limits();
  const auto left = [](std::size_t limit, std::size_t used, std::size_t reserve) {
    return limit > used + reserve ? limit - used - reserve : 0;
  };
  std::size_t most = static_cast<std::size_t>(n);  // n >= 0: checked
  if (limits.max_operations != TransactionLimits{}.max_operations) {
    most = std::min(most, std::max<std::size_t>(
                              1, left(limits.max_operations, used.operations, kReserveOperations) /
                                     kRedriveOperations));
  }
  std::vector<DeadLetter> letters = dead_.take_front(
      tr, contention::range_limit(most), left(limits.max_bytes, used.bytes, kReserveBytes));
  std::vector<std::int64_t> priorities;
  std::vector<std::string> randoms;
  for (const DeadLetter& d : letters) {
    priorities.push_back(d.priority);
    randoms.push_back(new_item_random());
  }
  const std::vector<std::string> keys =
      fresh_item_keys(tr, subspace_, items_, prioritized_, priorities, randoms);
  for (std::size_t i = 0; i < letters.size(); ++i) tr.set(keys[i], letters[i].value);
  contention::add_size(tr, items_, static_cast<std::int64_t>(letters.size()));
  return static_cast<std::int64_t>(letters.size());
}

std::optional<std::chrono::milliseconds> WorkItems::front_age(Transaction& tr) {
  auto front = contention::read_end(tr, items_, Side::kFront, 1, /*snapshot=*/true);
  if (front.empty()) return std::nullopt;
  auto pushed = item_pushed_us(parse_item_key(subspace_, front[0].key, prioritized_).random);
  if (!pushed) return std::nullopt;
  return std::chrono::milliseconds(std::max<std::int64_t>(0, (now_us() - *pushed) / 1000));
}

QueueStats WorkItems::stats(Transaction& tr) {
  QueueStats s;
  s.ready = counter(tr, items_.size_key);
  s.delayed = counter(tr, keys_.delayed());
  s.leased = counter(tr, keys_.leased());
  s.dead_letters = dead_.size(tr);
  s.oldest_ready_age = front_age(tr);
  return s;
}

void WorkItems::clear(Transaction& tr) {
  tr.clear_range(keys_.due_range().begin, keys_.due_range().end);
  tr.clear_range(keys_.taken_range().begin, keys_.taken_range().end);
  const KeyRange held_places = contention::held_range(items_);
  tr.clear_range(held_places.begin, held_places.end);
  tr.set(keys_.leased(), common::encode_le64(0));
  tr.set(keys_.delayed(), common::encode_le64(0));
}

}  // namespace kvq::detail
