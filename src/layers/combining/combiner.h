// Internal: flat combining within one process (Hendler et al., SPAA 2010; the writer groups of
// LevelDB's DBImpl::Write). Threads that submit requests to one Combiner at once queue up; the
// thread at the front leads: it takes the requests queued at that moment (up to a count and a
// weight), serves them all with one call of its serve function (one transaction, for the queue
// layers), marks each done and wakes their threads; then it serves the groups that queued
// meanwhile the same way, until its turn ends (GroupLimits), wakes the next leader and returns. A
// follower only waits on its own wake-up, posted once (served, or made the leader) after the
// leader has let go of the queue's lock, so a woken follower never blocks again on that lock: no
// extra thread, one wake-up per request. While cores are free, one follower per spare core polls
// its wake-up for a bounded time before it sleeps (GroupLimits::follower_poll). When a serve waits
// for long (an fsync), a leader first gathers the threads it knows are coming
// (GroupLimits::gather_min_serve), so that such a serve serves them together.
//
// Requests are served in the order they were submitted. If serve throws, every request of its
// group gets that exception (the group is one transaction: it took effect for all or none). A
// serve may instead answer some requests with an error of their own (Request::fail) or leave
// some for the next group (Request::defer); serve_in_batches (batches.h) does both by deadlines.
//
// Example:
//   struct Add : combining::Request { int value; };
//   combining::Combiner c({.max_count = 64});
//   Add r; r.value = 3;
//   c.submit(r, [&](std::vector<combining::Request*>& group) { ... one transaction ... });
#ifndef KVQ_SRC_LAYERS_COMBINING_COMBINER_H_
#define KVQ_SRC_LAYERS_COMBINING_COMBINER_H_

#include <semaphore.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "common/cpu_relax.h"

namespace kvq::combining {

// A one-shot wake-up: wait() blocks until post(). Normally a POSIX semaphore, because glibc (since
// 2.21) lets the waiter destroy it as soon as wait() returns, even while post() is still in its
// futex call, and a post costs one futex wake (a condition variable's waiter would wake only to
// wait again for the poster's mutex); std::binary_semaphore gives no such promise, and libstdc++'s
// spins with sched_yield before it sleeps, which on two cores with many waiters costs more than it
// saves. On a thread the installed clock schedules (kvq simulate), it waits through the clock
// instead (a mutex and condition variable; post() publishes under the mutex, so the waiter cannot
// return and destroy the Wakeup before post() has let go of it), so that the scheduler runs the
// leader meanwhile.
class Wakeup {
 public:
  Wakeup() { sem_init(&sem_, 0, 0); }
  ~Wakeup() { sem_destroy(&sem_); }
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // Lets wait() return; at most once per wait.
  void post() {
    if (!through_clock_) {
      sem_post(&sem_);
      return;
    }
    std::lock_guard lock(mu_);
    posted_ = true;
    cv_.notify_one();
  }
  // Polls for post() for up to `budget` (without sleeping): true if it came, and then wait() must
  // not be called. Always false on a thread the installed clock schedules.
  bool poll_for(std::chrono::microseconds budget) {
    if (through_clock_) return false;
    const auto until = std::chrono::steady_clock::now() + budget;
    for (unsigned i = 1;; ++i) {
      if (sem_trywait(&sem_) == 0) return true;
      common::cpu_relax();
      if (i % kPollsPerClockRead == 0 && std::chrono::steady_clock::now() >= until) return false;
    }
  }
  // Returns after post() (at once if it came first).
  void wait() { wait_until(common::SteadyTime::max()); }
  // Returns true after post(), or false once `deadline` (of common::clock()) has passed without
  // it; then a later post() must still be waited for before the Wakeup is destroyed.
  bool wait_until(common::SteadyTime deadline) {
    if (through_clock_) {
      std::unique_lock lock(mu_);
      return common::clock().wait_until(lock, cv_, deadline, [this] { return posted_; });
    }
    if (deadline == common::SteadyTime::max()) {
      while (sem_wait(&sem_) != 0) {
      }  // only EINTR: a signal handler ran
      return true;
    }
    return sem_wait_until(deadline);
  }

 private:
  static constexpr unsigned kPollsPerClockRead = 64;

  // wait_until on the semaphore. sem_timedwait takes a CLOCK_REALTIME time (ThreadSanitizer knows
  // it, not sem_clockwait), so the steady deadline is turned into one per call, and a wake-up at
  // the wall time of a clock stepped forward is checked against the steady clock and waited again.
  bool sem_wait_until(common::SteadyTime deadline) {
    for (;;) {
      const auto left = deadline - common::clock().steady_now();
      if (left.count() <= 0) return sem_trywait(&sem_) == 0;
      const auto until = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             (std::chrono::system_clock::now() + left).time_since_epoch())
                             .count();
      const timespec ts{static_cast<time_t>(until / 1'000'000'000),
                        static_cast<long>(until % 1'000'000'000)};
      if (sem_timedwait(&sem_, &ts) == 0) return true;
    }  // ETIMEDOUT (checked against the steady clock above) or EINTR (a signal handler ran)
  }

  // Decided where the Wakeup is made: on the thread that will wait.
  const bool through_clock_ = common::clock().schedules_calling_thread();
  sem_t sem_;
  std::mutex mu_;  // the clock's wait only
  std::condition_variable cv_;
  bool posted_ = false;
};

// One submitted operation; derive to add its arguments and results. Owned by its submitter (on
// its stack), which the Combiner does not copy.
struct Request {
  // What the request counts against GroupLimits::max_weight (e.g. its value's bytes).
  std::size_t weight = 0;
  // When its submitter stops waiting for an answer (SteadyTime::max(): never). A serve bounds its
  // work by its requests' deadlines (serve_in_batches); a leader whose own request has one serves
  // no group after its own, so that it returns in time; a follower still queued behind another
  // group at its deadline leaves the queue with timed_out (nothing done for it).
  common::SteadyTime deadline = common::SteadyTime::max();

  // For the serve of the group holding this request: answers it with `error`, which submit()
  // rethrows (the group's other requests keep their own answers). A kvq::Error is copied, so that
  // no two threads share one exception object (whose reference counts and message live in
  // libstdc++, which ThreadSanitizer does not see).
  void fail(const std::exception_ptr& error);
  // For the serve of the group holding this request: leaves it unanswered. It stays queued in its
  // place, and the group served next (led by the first request left so) serves it.
  void defer() { deferred_ = true; }

 private:
  friend class Combiner;
  bool done_ = false;      // written under the Combiner's lock before wake_ is posted
  bool in_group_ = false;  // taken into a group being served (under the Combiner's lock)
  bool deferred_ = false;  // set by defer(), cleared when the Combiner queues it again
  std::exception_ptr error_;
  Wakeup wake_;
};

// Bounds of one group. The first request of a group is always taken (so heavy requests are served,
// alone).
struct GroupLimits {
  std::size_t max_count = 128;
  std::size_t max_weight = static_cast<std::size_t>(-1);
  // A leader serves the groups queued behind its own, in a row, until it has served this many or
  // led for this long (a turn ends after the group that crosses it), then hands the lead on.
  std::size_t max_groups_per_leader = 16;
  std::chrono::microseconds max_lead_time{200};
  // A leader that would serve a group of its own request alone right after serving a group of
  // several first yields its core (std::this_thread::yield), once: the threads it just woke are
  // then runnable but have not run, and on a machine with fewer cores than threads they would wait
  // for it to be preempted. They run, queue up, and join its group. Cuts the tail latency several
  // times (a thread no longer waits out another's time slice) for more context switches and fewer
  // operations per second (docs/benchmarks.md, run F). Not on threads the installed clock
  // schedules (kvq simulate), whose order the clock decides.
  bool yield_when_alone = false;
  // A follower first polls its wake-up for up to this long before it sleeps, if fewer than
  // (cores - 1) threads of the process poll already (so none on one core) and this combiner's
  // groups take no longer than that to serve (Combiner::worth_polling). A follower served while
  // it polls needs no wake-up, and its polling keeps its core from going idle: on the 2-core
  // virtual machines kvq is measured on, a semaphore round trip between two threads takes 20 us
  // when the other core is idle and 7 us when it is busy (docs/benchmarks.md, run G). 0: always
  // sleep at once.
  std::chrono::microseconds follower_poll{50};
  // Group commit for serves that wait (an fsync, a Raft round: a group's cost hardly grows with its
  // size). When serving a group blocks for gather_min_serve or longer (a moving mean of the time
  // the serving thread spent blocked: not a serve that only computes), a leader first
  // waits, asleep, for the threads it knows of to queue: those the last group served (less its
  // own, if it keeps leading after its request was served) and those that had queued while it was
  // served, at most max_count. It waits until that many are queued, for at most half the mean
  // time serves spent off their core after blocking (and gather_max_wait), never while a request
  // with a deadline (a wait with a timeout) is queued, nor under a simulated clock,
  // and only while they keep coming: it stops when none queued for gather_gap (threads that do
  // work between their requests come back one by one, and would make every group wait the whole
  // budget for nothing). Without it, threads in a loop split into alternating groups (those
  // served, and those that queued while they were), and each expensive serve serves a part of
  // them (docs/benchmarks.md, "Gathered groups"). PostgreSQL's commit_delay, waiting for what is
  // known to come. gather_min_serve 0: never; each of the three at most an hour.
  std::chrono::microseconds gather_min_serve{100};
  std::chrono::microseconds gather_max_wait{2000};
  std::chrono::microseconds gather_gap{100};
};

// Groups and requests served by every Combiner of this process so far (for the simulator, which
// reports how many requests were served by another thread's group: requests - groups).
struct CombiningTotals {
  std::uint64_t groups = 0;
  std::uint64_t requests = 0;
};
CombiningTotals combining_totals();

// A thread's CPU time and voluntary context switches (it blocked: on I/O, a lock, a network
// reply) so far; what Combiner measures its serves with.
struct ThreadUsage {
  std::int64_t cpu_ns = 0;
  long blocked = 0;
};

class Combiner {
 public:
  // Serves the requests of one group, in order; its effect on each request is the request's
  // result. Called by one thread at a time.
  using Serve = std::function<void(std::vector<Request*>& group)>;

  explicit Combiner(GroupLimits limits) : limits_(limits) {}
  Combiner(const Combiner&) = delete;
  Combiner& operator=(const Combiner&) = delete;

  // Returns once `r` has been served, by this thread (leading a group) or by another thread's
  // group; rethrows what that group's serve threw. Thread-safe.
  void submit(Request& r, const Serve& serve);

  // Groups served and requests served so far (for benchmarks and tests).
  std::size_t groups() const;
  std::size_t requests() const;
  // Requests submitted and not yet done, those being served among them (for tests that must know
  // a request has queued before they submit the next).
  std::size_t queued() const;

 private:
  // A follower's wait for its wake-up: polled first if worth_polling() and a polling place is
  // free, else slept, until r.deadline; then withdrawn if it can be.
  void await(Request& r);
  // Once r.deadline has passed while r waits: takes r off the queue and answers it with
  // timed_out, unless it was answered, is in the group being served (whose batches end by its
  // deadline, serve_in_batches) or leads next (its wake-up may be under way); false then.
  bool withdraw(Request& r);
  // Whether the limits let followers poll at all: a budget, and a leader that does not yield
  // (yield_when_alone).
  bool followers_may_poll() const;
  // Under mu_ (held by `lock`), before a leader takes a group: waits while GroupLimits'
  // gather_min_serve says so for the last group's requests (but the leader's own, if
  // `own_request_done`) to queue again beside those queued after it, unless a queued request has
  // a deadline. Only under the real clock (a simulated one would move, and the serve times would
  // mix simulated and real time).
  void gather(std::unique_lock<std::mutex>& lock, bool own_request_done);
  // Whether a follower polls now (GroupLimits::follower_poll): if followers_may_poll() and groups
  // take no longer than the budget to serve (not a commit that waits for an fsync or a Raft
  // round: the follower would poll in vain).
  bool worth_polling() const;
  // Whether serving a group takes gather_min_serve or longer (serve_ns_): then serves measure
  // how long they block.
  bool serves_are_slow() const;
  // Adds the time serving a group started at `started` took to serve_ns_, and the part of it
  // the serving thread spent blocked to serve_wait_ns_ (`usage_before`: its usage at the start;
  // none: not measured, 0).
  void note_serve_time(common::SteadyTime started, const std::optional<ThreadUsage>& usage_before);
  void lead(Request& r, std::unique_lock<std::mutex>& lock, const Serve& serve);
  std::vector<Request*> take_group();
  // Under mu_: whether the leader yields its core before it takes the next group
  // (GroupLimits::yield_when_alone).
  bool should_yield() const;
  // Under mu_: marks the group's requests done (with `error`, if any) except those its serve
  // deferred, which stay at the front of the queue in their order and leave `group`; returns the
  // request now at the front (the next leader), or nullptr.
  Request* finish(std::vector<Request*>& group, const std::exception_ptr& error);

  GroupLimits limits_;
  mutable std::mutex mu_;
  std::deque<Request*> queue_;  // submitted, not yet done; the front one leads
  std::size_t groups_ = 0, requests_ = 0;
  std::size_t last_group_size_ = 0;          // of the group served last
  std::size_t queued_after_last_group_ = 0;  // requests queued when it was done (arrived meanwhile)
  // While a leader gathers: the queue length that ends its wait (submit() wakes it), else 0; and
  // whether a request with a deadline queued meanwhile (which ends it too).
  std::size_t gather_target_ = 0;
  bool gather_cut_ = false;
  std::condition_variable gathered_;
  // How long serving a group takes, in ns: a moving mean, each group weighing 1/kServeTimeWeight.
  static constexpr std::int64_t kServeTimeWeight = 8;
  std::atomic<std::int64_t> serve_ns_{0};
  // Of which the serving thread was blocked (an fsync, a network round trip; 0 for a serve that
  // never blocked): what gathering waits on (GroupLimits::gather_min_serve).
  std::atomic<std::int64_t> serve_wait_ns_{0};
};

}  // namespace kvq::combining

#endif  // KVQ_SRC_LAYERS_COMBINING_COMBINER_H_
