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
// All checks run in O(n log n).
#ifndef KVQ_TOOLS_KVQ_HISTORY_H_
#define KVQ_TOOLS_KVQ_HISTORY_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvq::history {

enum class PopKind { kFifo, kMin, kMax };

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
      : n_(n), min_(want_min),
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
  std::int64_t pick(std::int64_t a, std::int64_t b) const { return min_ ? std::min(a, b) : std::max(a, b); }
  std::size_t n_;
  bool min_;
  std::vector<std::int64_t> t_;
};

// `remaining`: values still in the queue at the end (e.g. from a final drain that is not part of
// `pops`); usually empty when the run drains through recorded pops.
inline Result check(const std::vector<Push>& pushes, const std::vector<Pop>& pops,
                    const std::vector<std::string>& remaining = {}) {
  constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  Result r;
  r.pushed = static_cast<std::int64_t>(pushes.size());
  r.remaining = static_cast<std::int64_t>(remaining.size());
  std::unordered_map<std::string, std::size_t> index;
  index.reserve(pushes.size());
  for (std::size_t i = 0; i < pushes.size(); ++i) {
    if (!index.emplace(pushes[i].value, i).second) r.fail("value pushed twice: " + pushes[i].value);
  }
  // Per item: the pop that took it.
  std::vector<std::int64_t> pop_of(pushes.size(), -1);
  for (std::size_t j = 0; j < pops.size(); ++j) {
    if (!pops[j].value) {
      ++r.empty_pops;
      continue;
    }
    ++r.popped;
    auto it = index.find(*pops[j].value);
    if (it == index.end()) {
      r.fail("popped a value never pushed: " + *pops[j].value);
      continue;
    }
    if (pop_of[it->second] != -1) {
      r.fail("value popped twice: " + *pops[j].value);
      continue;
    }
    pop_of[it->second] = static_cast<std::int64_t>(j);
  }
  std::vector<char> left(pushes.size(), 0);
  for (const auto& v : remaining) {
    auto it = index.find(v);
    if (it == index.end()) {
      r.fail("remaining value never pushed: " + v);
    } else if (pop_of[it->second] != -1) {
      r.fail("value both popped and remaining: " + v);
    } else {
      left[it->second] = 1;
    }
  }
  for (std::size_t i = 0; i < pushes.size(); ++i) {
    if (pop_of[i] == -1 && !left[i]) r.fail("value lost (pushed, never popped): " + pushes[i].value);
  }
  auto pop_start = [&](std::size_t i) {
    return pop_of[i] < 0 ? kNever : pops[static_cast<std::size_t>(pop_of[i])].start;
  };

  // Items sorted by push end; pops sorted by start. For each pop, the items "present throughout"
  // are a prefix (push_end < pop.start) filtered by pop_start(X) > pop.end.
  std::vector<std::size_t> by_push_end(pushes.size());
  for (std::size_t i = 0; i < by_push_end.size(); ++i) by_push_end[i] = i;
  std::sort(by_push_end.begin(), by_push_end.end(),
            [&](std::size_t a, std::size_t b) { return pushes[a].end < pushes[b].end; });
  std::vector<std::size_t> by_start(pops.size());
  for (std::size_t j = 0; j < by_start.size(); ++j) by_start[j] = j;
  std::sort(by_start.begin(), by_start.end(),
            [&](std::size_t a, std::size_t b) { return pops[a].start < pops[b].start; });
  // Ranks of items' pop starts, for the Fenwick trees.
  std::vector<std::int64_t> starts;
  starts.reserve(pushes.size());
  for (std::size_t i = 0; i < pushes.size(); ++i) starts.push_back(pop_start(i));
  std::sort(starts.begin(), starts.end());
  auto rank_after = [&](std::int64_t t) {  // first rank with pop_start > t
    return static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), t) - starts.begin());
  };
  auto rank_of = [&](std::int64_t t) {
    return static_cast<std::size_t>(std::lower_bound(starts.begin(), starts.end(), t) - starts.begin());
  };
  SuffixBest min_prio(starts.size(), true), max_prio(starts.size(), false);
  std::int64_t latest_pop_start = std::numeric_limits<std::int64_t>::min();
  std::size_t k = 0;
  for (std::size_t j : by_start) {
    const Pop& p = pops[j];
    while (k < by_push_end.size() && pushes[by_push_end[k]].end < p.start) {
      std::size_t i = by_push_end[k++];
      std::size_t rank = rank_of(pop_start(i));
      min_prio.update(rank, pushes[i].priority);
      max_prio.update(rank, pushes[i].priority);
      latest_pop_start = std::max(latest_pop_start, pop_start(i));
    }
    std::size_t from = rank_after(p.end);
    bool someone_present = latest_pop_start > p.end;
    if (!p.value) {
      if (someone_present) r.fail("a pop returned nothing while an item was queued throughout");
      continue;
    }
    auto it = index.find(*p.value);
    if (it == index.end()) continue;
    std::int64_t prio = pushes[it->second].priority;
    if (p.kind == PopKind::kMin && min_prio.query(from) < prio) {
      r.fail("pop_min returned priority " + std::to_string(prio) + " while priority " +
             std::to_string(min_prio.query(from)) + " was queued throughout");
    }
    if (p.kind == PopKind::kMax && max_prio.query(from) > prio) {
      r.fail("pop_max returned priority " + std::to_string(prio) + " while priority " +
             std::to_string(max_prio.query(from)) + " was queued throughout");
    }
  }

  // FIFO: items sorted by push end; walking items B by push start, A ranges over the prefix with
  // push_end(A) < push_start(B); violation if max pop_start(A) > pop_end(B).
  bool fifo = false;
  for (const auto& p : pops) fifo = fifo || p.kind == PopKind::kFifo;
  if (fifo) {
    std::vector<std::size_t> by_push_start(by_push_end);
    std::sort(by_push_start.begin(), by_push_start.end(),
              [&](std::size_t a, std::size_t b) { return pushes[a].start < pushes[b].start; });
    std::int64_t running = std::numeric_limits<std::int64_t>::min();
    std::size_t a = 0;
    for (std::size_t b : by_push_start) {
      while (a < by_push_end.size() && pushes[by_push_end[a]].end < pushes[b].start) {
        running = std::max(running, pop_start(by_push_end[a++]));
      }
      if (pop_of[b] < 0) continue;
      if (running > pops[static_cast<std::size_t>(pop_of[b])].end) {
        r.fail("FIFO violated: " + pushes[b].value + " popped before an item pushed earlier");
      }
    }
  }
  return r;
}

}  // namespace kvq::history

#endif  // KVQ_TOOLS_KVQ_HISTORY_H_
