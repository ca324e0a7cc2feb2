#include "layers/combining/combiner.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "kvq/error.h"

namespace kvq::combining {
namespace {

std::atomic<std::uint64_t> total_groups{0}, total_requests{0};

// The followers of this process polling their wake-ups now (Combiner::await), at most
// kMaxPolling: one fewer than the cores, so that polling never takes the core a leader needs.
std::atomic<int> polling{0};
const int kMaxPolling = static_cast<int>(std::thread::hardware_concurrency()) - 1;

// The calling thread's usage so far.
ThreadUsage thread_usage() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  const auto ns = [](const timeval& t) {
    return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 +
           static_cast<std::int64_t>(t.tv_usec) * 1'000;
  };
  return {ns(ru.ru_utime) + ns(ru.ru_stime), ru.ru_nvcsw};
}

// Adds `sample` to the moving mean `mean`: the first sample is the first mean (a combiner that
// serves slowly measures its second group and gathers from its third on), then each weighs
// 1/weight.
void add_to_mean(std::atomic<std::int64_t>& mean, std::int64_t sample, std::int64_t weight) {
  const std::int64_t m = mean.load(std::memory_order_relaxed);
  mean.store(m == 0 ? sample : m + (sample - m) / weight, std::memory_order_relaxed);
}

// A place among the polling followers, if one is free (held until destroyed).
class PollingPlace {
 public:
  PollingPlace() {
    int now = polling.load(std::memory_order_relaxed);
    while (now < kMaxPolling &&
           !polling.compare_exchange_weak(now, now + 1, std::memory_order_relaxed)) {
    }
    held_ = now < kMaxPolling;
  }
  ~PollingPlace() {
    if (held_) polling.fetch_sub(1, std::memory_order_relaxed);
  }
  PollingPlace(const PollingPlace&) = delete;
  PollingPlace& operator=(const PollingPlace&) = delete;
  bool held() const { return held_; }

 private:
  bool held_ = false;
};

}  // namespace

void Request::fail(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    error_ = std::make_exception_ptr(Error(e.code(), e.what()));
  } catch (...) {
    error_ = error;
  }
}

CombiningTotals combining_totals() {
  return {total_groups.load(std::memory_order_relaxed),
          total_requests.load(std::memory_order_relaxed)};
}

void Combiner::submit(Request& r, const Serve& serve) {
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&r);
  if (gather_target_ != 0) {
    // A request that must be answered by a deadline ends a gathering: it waits for no one.
    if (r.deadline != common::SteadyTime::max()) gather_cut_ = true;
    if (gather_cut_ || queue_.size() >= gather_target_) gathered_.notify_one();
  }
  if (queue_.front() != &r) {
    lock.unlock();
    await(r);  // posted once: served by a leader, or made the leader
    if (!r.done_) {
      lock.lock();
      lead(r, lock, serve);
    }
  } else {
    lead(r, lock, serve);
  }
  if (r.error_) std::rethrow_exception(r.error_);
}

void Combiner::await(Request& r) {
  if (worth_polling()) {
    const PollingPlace place;
    if (place.held() && r.wake_.poll_for(limits_.follower_poll)) return;
  }
  if (r.wake_.wait_until(r.deadline) || withdraw(r)) return;
  r.wake_.wait();
}

bool Combiner::withdraw(Request& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (r.done_ || r.in_group_ || queue_.front() == &r) return false;
  queue_.erase(std::find(queue_.begin(), queue_.end(), &r));
  r.error_ = std::make_exception_ptr(
      Error(ErrorCode::kTimedOut,
            "combined operation: its deadline passed while it was queued behind other threads' "
            "groups (nothing was done for it)"));
  r.done_ = true;
  return true;
}

bool Combiner::followers_may_poll() const {
  return limits_.follower_poll.count() > 0 && !limits_.yield_when_alone;
}

void Combiner::gather(std::unique_lock<std::mutex>& lock, bool own_request_done) {
  // The threads of the last group come back, and those that queued while it was served are
  // still queued; but a leader whose own request is done queues nothing again until it stops
  // leading.
  const std::size_t known = last_group_size_ + queued_after_last_group_;
  const std::size_t target =
      std::min(known - (own_request_done && known > 0 ? 1 : 0), limits_.max_count);
  const std::int64_t wait_ns = serve_wait_ns_.load(std::memory_order_relaxed);
  const auto has_deadline = [](const Request* q) {
    return q->deadline != common::SteadyTime::max();
  };
  if (limits_.gather_min_serve.count() == 0 || queue_.size() >= target ||
      wait_ns < std::chrono::nanoseconds(limits_.gather_min_serve).count() ||
      std::any_of(queue_.begin(), queue_.end(), has_deadline) || !common::real_clock_installed()) {
    return;
  }
  const common::SteadyTime deadline =
      common::clock().steady_now() +
      std::min<std::chrono::nanoseconds>(std::chrono::nanoseconds(wait_ns / 2),
                                         limits_.gather_max_wait);
  gather_target_ = target;
  gather_cut_ = false;
  for (std::size_t queued_before = queue_.size();; queued_before = queue_.size()) {
    const common::SteadyTime until =
        std::min(deadline, common::clock().steady_now() + limits_.gather_gap);
    if (common::clock().wait_until(lock, gathered_, until,
                                   [&] { return gather_cut_ || queue_.size() >= target; })) {
      break;
    }
    if (until == deadline || queue_.size() <= queued_before) break;  // nobody came in the gap
  }
  gather_target_ = 0;
}

bool Combiner::worth_polling() const {
  return followers_may_poll() && serve_ns_.load(std::memory_order_relaxed) <=
                                     std::chrono::nanoseconds(limits_.follower_poll).count();
}

bool Combiner::serves_are_slow() const {
  return limits_.gather_min_serve.count() > 0 &&
         serve_ns_.load(std::memory_order_relaxed) >=
             std::chrono::nanoseconds(limits_.gather_min_serve).count();
}

void Combiner::note_serve_time(common::SteadyTime started,
                               const std::optional<ThreadUsage>& usage_before) {
  const std::int64_t took =
      std::chrono::duration_cast<std::chrono::nanoseconds>(common::clock().steady_now() - started)
          .count();
  // Time the serve spent off its core, counted only if it blocked: a serve preempted while it
  // computed did not wait for anything that more requests would share.
  std::int64_t waited = 0;
  if (usage_before) {
    const ThreadUsage usage = thread_usage();
    if (usage.blocked > usage_before->blocked) {
      waited = std::max<std::int64_t>(0, took - (usage.cpu_ns - usage_before->cpu_ns));
    }
  }
  add_to_mean(serve_ns_, took, kServeTimeWeight);
  add_to_mean(serve_wait_ns_, waited, kServeTimeWeight);
}

// Serves the group queued now, `r` (at the front) first, outside the lock (others keep queueing),
// and wakes its followers; then, while requests are queued and the leader's turn lasts, the next
// groups the same way, so that no thread switch lies between one group and the next. When the turn
// ends with requests left, it wakes the next leader before the followers, so that the next group
// forms while they wake.
void Combiner::lead(Request& r, std::unique_lock<std::mutex>& lock, const Serve& serve) {
  // kvq's clock, so that a simulated run is the same for the same seed.
  const common::SteadyTime turn_end = common::clock().steady_now() + limits_.max_lead_time;
  for (std::size_t turn = 1;; ++turn) {
    if (should_yield()) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    gather(lock, r.done_);
    std::vector<Request*> group = take_group();
    lock.unlock();
    const common::SteadyTime started = common::clock().steady_now();
    // Two system calls: only where a serve takes long enough for its waits to matter.
    const std::optional<ThreadUsage> usage_before =
        serves_are_slow() ? std::optional(thread_usage()) : std::nullopt;
    std::exception_ptr error;
    try {
      serve(group);
    } catch (...) {
      error = std::current_exception();
    }
    note_serve_time(started, usage_before);
    lock.lock();
    // While the queue is not empty, the requests queued since wait behind its front one, whose
    // thread waits to be woken: this thread may go on serving them.
    Request* next_leader = finish(group, error);
    last_group_size_ = group.size();  // answered (those deferred are queued again)
    queued_after_last_group_ = queue_.size();
    lock.unlock();
    // r deferred: it is at the front again, and this thread leads until it is answered.
    const bool go_on =
        next_leader != nullptr && (!r.done_ || (r.deadline == common::SteadyTime::max() &&
                                                turn < limits_.max_groups_per_leader &&
                                                common::clock().steady_now() < turn_end));
    if (next_leader != nullptr && !go_on) next_leader->wake_.post();
    // Each post may let its request's thread return and destroy the request: nothing of a
    // request is touched after its post.
    for (Request* q : group) {
      if (q != &r) q->wake_.post();
    }
    if (!go_on) return;
    lock.lock();
  }
}

bool Combiner::should_yield() const {
  return limits_.yield_when_alone && queue_.size() == 1 && last_group_size_ > 1 &&
         !common::clock().schedules_calling_thread();
}

// The requests at the front of the queue that fit in one group (left in the queue until done, so
// that later arrivals wait behind them).
std::vector<Request*> Combiner::take_group() {
  std::vector<Request*> group;
  std::size_t weight = 0;
  for (Request* q : queue_) {
    if (group.size() >= limits_.max_count) break;
    if (!group.empty() && weight + q->weight > limits_.max_weight) break;
    weight += q->weight;
    q->in_group_ = true;
    group.push_back(q);
  }
  return group;
}

Request* Combiner::finish(std::vector<Request*>& group, const std::exception_ptr& error) {
  const auto group_end = queue_.begin() + static_cast<std::ptrdiff_t>(group.size());
  if (error) {
    for (Request* q : group) q->fail(error);  // one transaction: it failed for all
  }
  for (Request* q : group) q->done_ = error || !q->deferred_;
  queue_.erase(std::remove_if(queue_.begin(), group_end, [](Request* q) { return q->done_; }),
               group_end);
  std::erase_if(group, [](Request* q) {
    q->deferred_ = q->in_group_ = false;
    return !q->done_;
  });
  ++groups_;
  requests_ += group.size();
  total_groups.fetch_add(1, std::memory_order_relaxed);
  total_requests.fetch_add(group.size(), std::memory_order_relaxed);
  return queue_.empty() ? nullptr : queue_.front();
}

std::size_t Combiner::groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_;
}

std::size_t Combiner::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::size_t Combiner::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

}  // namespace kvq::combining
