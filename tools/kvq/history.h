// A checker for the histories of concurrent Queue / PriorityQueue runs (used by `kvq demo` and the
// concurrency tests). Each operation is recorded with the steady-clock interval in which it ran;
// the checker verifies what is checkable from outside:
//  - every popped value was pushed, no value is popped twice, every pushed value was popped or is
//    still listed as remaining (nothing lost);
//  - FIFO (queues): if push(A) ended before push(B) started, pop(B) did not end before pop(A)
//    started;
//  - priority (pop_min / pop_max): a pop never returns an item of higher (pop_min) / lower
//    (pop_max) priority than an item X that was in the queue during the whole pop (push(X) ended
//    before the pop started, and X's pop started after it ended, or X was never popped);
//  - empty pops: a pop that returned nothing did not run while an item was in the queue during
//    the whole pop.
// and, for a FairQueue's pops run one after another, round-robin (round_robin_break). Pops
// recorded as kAny are checked only for exactly-once delivery (no order, no empty check).
// All checks run in O(n log n).
#ifndef KVQ_TOOLS_KVQ_HISTORY_H_
#define KVQ_TOOLS_KVQ_HISTORY_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kvq::history {

// kAny: a pop that promises no order, e.g. when deliveries to expired high-contention requests go
// back to the queue behind later pops.
enum class PopKind { kFifo, kMin, kMax, kAny };

// The clock of the intervals below: steady-clock nanoseconds.
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The histories recorded per thread, as one.
template <typename T>
std::vector<T> flatten(const std::vector<std::vector<T>>& parts) {
  std::vector<T> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

struct Push {
  std::string value;  // unique per history
  std::int64_t priority = 0;
  std::int64_t start = 0, end = 0;  // steady-clock nanoseconds
};

struct Pop {
  PopKind kind = PopKind::kFifo;
  std::optional<std::string> value;
  std::int64_t start = 0, end = 0;
};

struct Result {
  bool ok = true;
  std::int64_t pushed = 0, popped = 0, empty_pops = 0, remaining = 0;
  std::int64_t violations = 0;
  std::vector<std::string> problems;  // the first few, readable
  void fail(const std::string& what) {
    ok = false;
    ++violations;
    if (problems.size() < 10) problems.push_back(what);
  }
};

// Fenwick tree over positions 0..n-1 answering "best over positions >= i" for a monotone update
// (insert-only), where best is min (less=true) or max.
class SuffixBest {
 public:
  SuffixBest(std::size_t n, bool want_min)
      : n_(n),
        min_(want_min),
        t_(n + 1, want_min ? std::numeric_limits<std::int64_t>::max()
                           : std::numeric_limits<std::int64_t>::min()) {}
  void update(std::size_t pos, std::int64_t v) {  // positions reversed: suffix -> prefix
    for (std::size_t i = n_ - pos; i <= n_; i += i & (~i + 1)) t_[i] = pick(t_[i], v);
  }
  std::int64_t query(std::size_t pos) const {  // best over positions >= pos
    std::int64_t r = t_[0];
    if (pos >= n_) return r;
    for (std::size_t i = n_ - pos; i > 0; i -= i & (~i + 1)) r = pick(r, t_[i]);
    return r;
  }

 private:
  std::int64_t pick(std::int64_t a, std::int64_t b) const {
    return min_ ? std::min(a, b) : std::max(a, b);
  }
  std::size_t n_;
  bool min_;
  std::vector<std::int64_t> t_;
};

namespace detail {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// What the steps of check() share: the items by value, and the pop that took each item.
struct Matching {
  std::unordered_map<std::string, std::size_t> index;  // value -> push
  std::vector<std::int64_t> pop_of;                    // push -> pop (-1: never popped)
  const std::vector<Push>* pushes;
  const std::vector<Pop>* pops;

  std::int64_t pop_start(std::size_t i) const {
    return pop_of[i] < 0 ? kNever : (*pops)[static_cast<std::size_t>(pop_of[i])].start;
  }
};

// Indexes the pushes by value (each value must be unique).
inline void index_pushes(Matching& m, Result& r) {
  const auto& pushes = *m.pushes;
  m.index.reserve(pushes.size());
  for (std::size_t i = 0; i < pushes.size(); ++i) {
    if (!m.index.emplace(pushes[i].value, i).second) {
      r.fail("value pushed twice: " + pushes[i].value);
    }
  }
}

// Matches every successful pop with its push: popped values were pushed, and popped once.
inline void match_pops(Matching& m, Result& r) {
  const auto& pops = *m.pops;
  m.pop_of.assign(m.pushes->size(), -1);
  for (std::size_t j = 0; j < pops.size(); ++j) {
    if (!pops[j].value) {
      ++r.empty_pops;
      continue;
    }
    ++r.popped;
    auto it = m.index.find(*pops[j].value);
    if (it == m.index.end()) {
      r.fail("popped a value never pushed: " + *pops[j].value);
    } else if (m.pop_of[it->second] != -1) {
      r.fail("value popped twice: " + *pops[j].value);
    } else {
      m.pop_of[it->second] = static_cast<std::int64_t>(j);
    }
  }
}

// Every pushed value was popped or is remaining, never both; remaining values were pushed.
inline void check_nothing_lost(const Matching& m, const std::vector<std::string>& remaining,
                               Result& r) {
  std::vector<char> left(m.pushes->size(), 0);
  for (const auto& v : remaining) {
    auto it = m.index.find(v);
    if (it == m.index.end()) {
      r.fail("remaining value never pushed: " + v);
    } else if (m.pop_of[it->second] != -1) {
      r.fail("value both popped and remaining: " + v);
    } else {
      left[it->second] = 1;
    }
  }
  for (std::size_t i = 0; i < m.pushes->size(); ++i) {
    if (m.pop_of[i] == -1 && !left[i]) {
      r.fail("value lost (pushed, never popped): " + (*m.pushes)[i].value);
    }
  }
}

// Indices 0..n-1 sorted by key(i).
template <typename Key>
std::vector<std::size_t> sorted_by(std::size_t n, Key key) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  return order;
}

// The items present throughout pops, fed in order of pop start: an item X is added once its push
// ended before the pop started; the pop then sees the X whose pop started after the pop ended
// (ranked by pop start, best priority over a suffix of ranks).
class PresentItems {
 public:
  explicit PresentItems(const Matching& m)
      : m_(m),
        by_push_end_(
            sorted_by(m.pushes->size(), [&](std::size_t i) { return (*m.pushes)[i].end; })),
        min_(m.pushes->size(), true),
        max_(m.pushes->size(), false) {
    for (std::size_t i = 0; i < m.pushes->size(); ++i) starts_.push_back(m.pop_start(i));
    std::sort(starts_.begin(), starts_.end());
  }

  // Adds the items whose push ended before `t`.
  void advance_to(std::int64_t t) {
    const auto& pushes = *m_.pushes;
    while (k_ < by_push_end_.size() && pushes[by_push_end_[k_]].end < t) {
      const std::size_t i = by_push_end_[k_++];
      const std::int64_t start = m_.pop_start(i);
      const auto rank = static_cast<std::size_t>(
          std::lower_bound(starts_.begin(), starts_.end(), start) - starts_.begin());
      min_.update(rank, pushes[i].priority);
      max_.update(rank, pushes[i].priority);
      latest_pop_start_ = std::max(latest_pop_start_, start);
    }
  }
  // Whether some added item was still queued after `t` (its pop started after t, or never).
  bool any_after(std::int64_t t) const { return latest_pop_start_ > t; }
  // The lowest / highest priority of the added items still queued after `t`.
  std::int64_t min_after(std::int64_t t) const { return min_.query(rank_after(t)); }
  std::int64_t max_after(std::int64_t t) const { return max_.query(rank_after(t)); }

 private:
  std::size_t rank_after(std::int64_t t) const {
    return static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), t) -
                                    starts_.begin());
  }
  const Matching& m_;
  std::vector<std::size_t> by_push_end_;
  std::vector<std::int64_t> starts_;
  SuffixBest min_, max_;
  std::size_t k_ = 0;
  std::int64_t latest_pop_start_ = std::numeric_limits<std::int64_t>::min();
};

// Priority order and empty pops, against the items present throughout each pop.
inline void check_priorities(const Matching& m, Result& r) {
  const auto& pops = *m.pops;
  PresentItems present(m);
  for (std::size_t j : sorted_by(pops.size(), [&](std::size_t i) { return pops[i].start; })) {
    const Pop& p = pops[j];
    present.advance_to(p.start);
    if (p.kind == PopKind::kAny) continue;
    if (!p.value) {
      if (present.any_after(p.end))
        r.fail("a pop returned nothing while an item was queued throughout");
      continue;
    }
    auto it = m.index.find(*p.value);
    if (it == m.index.end()) continue;
    const std::int64_t prio = (*m.pushes)[it->second].priority;
    if (p.kind == PopKind::kMin && present.min_after(p.end) < prio) {
      r.fail("pop_min returned priority " + std::to_string(prio) + " while priority " +
             std::to_string(present.min_after(p.end)) + " was queued throughout");
    }
    if (p.kind == PopKind::kMax && present.max_after(p.end) > prio) {
      r.fail("pop_max returned priority " + std::to_string(prio) + " while priority " +
             std::to_string(present.max_after(p.end)) + " was queued throughout");
    }
  }
}

// FIFO: walking items B by push start, A ranges over the items with push_end(A) <
// push_start(B); a violation if some such A's pop started after B's pop ended.
inline void check_fifo(const Matching& m, Result& r) {
  const auto& pushes = *m.pushes;
  const auto by_end = sorted_by(pushes.size(), [&](std::size_t i) { return pushes[i].end; });
  const auto by_start = sorted_by(pushes.size(), [&](std::size_t i) { return pushes[i].start; });
  std::int64_t running = std::numeric_limits<std::int64_t>::min();
  std::size_t a = 0;
  for (std::size_t b : by_start) {
    while (a < by_end.size() && pushes[by_end[a]].end < pushes[b].start) {
      running = std::max(running, m.pop_start(by_end[a++]));
    }
    if (m.pop_of[b] < 0) continue;
    if (running > (*m.pops)[static_cast<std::size_t>(m.pop_of[b])].end) {
      r.fail("FIFO violated: " + pushes[b].value + " popped before an item pushed earlier");
    }
  }
}

}  // namespace detail

// The first pair of turns that breaks round-robin in `tenants` (the tenants of successive pops,
// all weights 1, no push meanwhile): a tenant served twice while another that still had items
// (it is served later) was not served in between. "" if none.
inline std::string round_robin_break(const std::vector<std::string>& tenants) {
  std::unordered_map<std::string, std::size_t> last_turn;
  for (std::size_t j = 0; j < tenants.size(); ++j) {
    auto it = last_turn.find(tenants[j]);
    if (it != last_turn.end()) {
      const std::size_t i = it->second;
      for (std::size_t k = j + 1; k < tenants.size(); ++k) {
        const auto first = tenants.begin() + static_cast<std::ptrdiff_t>(i + 1);
        const auto last = tenants.begin() + static_cast<std::ptrdiff_t>(j);
        if (tenants[k] != tenants[j] && std::find(first, last, tenants[k]) == last) {
          return tenants[j] + " served at turns " + std::to_string(i) + " and " +
                 std::to_string(j) + " while " + tenants[k] + " waited";
        }
      }
    }
    last_turn[tenants[j]] = j;
  }
  return "";
}

// The first run of turns in `tenants` (the tenants of successive pops, no push meanwhile) that
// breaks weighted round-robin, `weight_of` giving each tenant's turns per round: a tenant's turns
// come in runs of its weight, each run but its last (when its items ran out) exactly that long,
// and the last one of all as long as it lasts (alone, a tenant keeps the turn); and the runs go
// round-robin (round_robin_break over one entry a run). "" if none. With every weight 1 this is
// round_robin_break.
template <typename WeightOf>
std::string weighted_round_break(const std::vector<std::string>& tenants, WeightOf&& weight_of) {
  struct Run {
    std::string tenant;
    std::size_t start = 0, length = 0;
  };
  std::vector<Run> runs;
  for (std::size_t j = 0; j < tenants.size(); ++j) {
    if (runs.empty() || runs.back().tenant != tenants[j]) runs.push_back({tenants[j], j, 0});
    ++runs.back().length;
  }
  std::unordered_map<std::string, std::size_t> last_run;
  for (std::size_t r = 0; r < runs.size(); ++r) last_run[runs[r].tenant] = r;
  std::vector<std::string> run_tenants;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    run_tenants.push_back(run.tenant);
    if (r + 1 == runs.size()) break;  // the last run of all: alone, as long as its items last
    const auto weight = static_cast<std::size_t>(weight_of(run.tenant));
    const bool its_last = last_run.at(run.tenant) == r;
    if (run.length > weight || (!its_last && run.length < weight)) {
      return run.tenant + " (weight " + std::to_string(weight) + ") served " +
             std::to_string(run.length) + " turns in a row from turn " + std::to_string(run.start);
    }
  }
  if (std::string why = round_robin_break(run_tenants); !why.empty()) {
    return "the runs of turns (one entry a run): " + why;
  }
  return "";
}

// Checks a whole history (the file comment lists what). `remaining`: values still in the queue at
// the end (e.g. from a final drain that is not part of `pops`); usually empty when the run drains
// through recorded pops. The FIFO check runs if any pop is a kFifo pop.
inline Result check(const std::vector<Push>& pushes, const std::vector<Pop>& pops,
                    const std::vector<std::string>& remaining = {}) {
  Result r;
  r.pushed = static_cast<std::int64_t>(pushes.size());
  r.remaining = static_cast<std::int64_t>(remaining.size());
  detail::Matching m;
  m.pushes = &pushes;
  m.pops = &pops;
  detail::index_pushes(m, r);
  detail::match_pops(m, r);
  detail::check_nothing_lost(m, remaining, r);
  detail::check_priorities(m, r);
  const bool fifo =
      std::any_of(pops.begin(), pops.end(), [](const Pop& p) { return p.kind == PopKind::kFifo; });
  if (fifo) detail::check_fifo(m, r);
  return r;
}

// FIFO over first deliveries (`firsts`: each value's first pop) within each group of items
// (group_of(push)), leaving out the items first delivered from a PriorityQueue's high end
// (pop_max takes the newest of a priority) and pops of values never pushed (check() reports
// those). One Result per group.
template <typename GroupOf>
std::vector<Result> check_fifo_within(const std::vector<Push>& pushes,
                                      const std::vector<Pop>& firsts, GroupOf group_of) {
  std::unordered_set<std::string> from_top;
  for (const Pop& p : firsts) {
    if (p.value && p.kind == PopKind::kMax) from_top.insert(*p.value);
  }
  std::map<std::string, std::pair<std::vector<Push>, std::vector<Pop>>> groups;
  std::unordered_map<std::string, std::string> group_by_value;
  for (const Push& p : pushes) {
    if (from_top.contains(p.value)) continue;
    const std::string g = group_of(p);
    group_by_value[p.value] = g;
    groups[g].first.push_back(p);
  }
  for (const Pop& p : firsts) {
    if (!p.value || from_top.contains(*p.value)) continue;
    auto it = group_by_value.find(*p.value);
    if (it == group_by_value.end()) continue;
    groups[it->second].second.push_back({PopKind::kFifo, p.value, p.start, p.end});
  }
  std::vector<Result> out;
  for (const auto& [group, g] : groups) out.push_back(check(g.first, g.second));
  return out;
}

}  // namespace kvq::history

#endif  // KVQ_TOOLS_KVQ_HISTORY_H_
