#include "layers/contention/end_windows.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kvq/error.h"
#include "kvq/subspace.h"
#include "kvq/tuple.h"

namespace kvq::contention {

// An item's place: (priority, position); priority is 0 in a Queue.
struct Place {
  std::int64_t priority = 0;
  std::int64_t position = 0;
};

struct EndHints {
  std::mutex mu;
  std::optional<Place> ends[2];                          // by Side
  std::unordered_map<std::int64_t, std::int64_t> tails;  // priority -> last position (pushes)
};

namespace {

// Positions a window spans beyond the hint at least (and twice the items asked for).
constexpr std::int64_t kWindow = 128;
// Bound on the remembered tails of priorities (a map, cleared when full).
constexpr std::size_t kMaxTails = 4096;

// The place of item key `key`, or nullopt for a key kvq did not write.
std::optional<Place> place_of(const ItemRange& items, const std::string& key) {
  try {
    const Tuple t = Tuple::unpack(std::string_view(key).substr(items.prefix_size));
    if (!items.prioritized) return Place{0, t.get_int(0)};
    return Place{t.get_int(0), t.get_int(1)};
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The key just before the items at `position` + `delta` (of `priority`), or nullopt if that
// position overflows.
std::optional<std::string> bound_at(const ItemRange& items, Place p, std::int64_t delta) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  if ((delta > 0 && p.position > kMax - delta) || (delta < 0 && p.position < kMin - delta)) {
    return std::nullopt;
  }
  Tuple t;
  if (items.prioritized) t.append(p.priority);
  t.append(p.position + delta);
  return items.begin.substr(0, items.prefix_size) + t.pack();
}

// Whether a read of `limit` items of [begin, end) reads the window next to `bound` first (else
// the whole range at once).
bool windowed(const std::string& begin, const std::string& end,
              const std::optional<std::string>& bound, int limit) {
  // (A limit of 0 means "no limit": the window alone would not do.)
  return bound && limit > 0 && *bound > begin && *bound < end;
}

// The first read of read_two_parts(tr, begin, end, bound, side, limit, snapshot) (its strings
// viewed, not copied).
RangeRead first_part(const std::string& begin, const std::string& end,
                     const std::optional<std::string>& bound, Side side, int limit, bool snapshot) {
  const bool back = side == Side::kBack;
  const RangeOptions options{.limit = limit, .reverse = back, .snapshot = snapshot};
  if (!windowed(begin, end, bound, limit)) return {begin, end, options};
  return back ? RangeRead{*bound, end, options} : RangeRead{begin, *bound, options};
}

// Up to `limit` items of [begin, end) from `side`: first from the window between `bound` and
// that side's end, then, if it ran short, from the rest (see the file comment).
std::vector<KeyValue> read_two_parts(Transaction& tr, const std::string& begin,
                                     const std::string& end,
                                     const std::optional<std::string>& bound, Side side, int limit,
                                     bool snapshot) {
  const bool back = side == Side::kBack;
  const RangeRead first = first_part(begin, end, bound, side, limit, snapshot);
  std::vector<KeyValue> near = tr.get_range(first.begin, first.end, first.options);
  if (!windowed(begin, end, bound, limit)) return near;
  const int rest = limit - static_cast<int>(near.size());
  if (rest <= 0) return near;
  std::vector<KeyValue> far =
      back ? tr.get_range(begin, *bound, {.limit = rest, .reverse = true, .snapshot = snapshot})
           : tr.get_range(*bound, end, {.limit = rest, .snapshot = snapshot});
  near.insert(near.end(), std::make_move_iterator(far.begin()), std::make_move_iterator(far.end()));
  return near;
}

// Remembers item key `key` as the last of its priority (for the next push's window).
void remember_tail(const ItemRange& items, const std::string& key) {
  if (!items.hints) return;
  auto p = place_of(items, key);
  if (!p) return;
  std::lock_guard lock(items.hints->mu);
  if (items.hints->tails.size() >= kMaxTails) items.hints->tails.clear();
  items.hints->tails[p->priority] = p->position;
}

// The bound of the window that a read of `limit` items at `side` of `items` reads first, from
// the hint; nullopt without one.
std::optional<std::string> window_bound(const ItemRange& items, Side side, int limit) {
  if (!items.hints) return std::nullopt;
  std::optional<Place> hint;
  {
    std::lock_guard lock(items.hints->mu);
    hint = items.hints->ends[static_cast<int>(side)];
  }
  if (!hint) return std::nullopt;
  const std::int64_t window = std::max<std::int64_t>(kWindow, 2 * std::int64_t{limit});
  return bound_at(items, *hint, side == Side::kBack ? -window : window);
}

}  // namespace

std::shared_ptr<EndHints> make_end_hints() { return std::make_shared<EndHints>(); }

std::vector<KeyValue> read_end(Transaction& tr, const ItemRange& items, Side side, int limit,
                               bool snapshot) {
  const std::optional<std::string> bound = window_bound(items, side, limit);
  std::vector<KeyValue> out =
      read_two_parts(tr, items.begin, items.end, bound, side, limit, snapshot);
  if (items.hints && !out.empty()) {
    if (auto p = place_of(items, out.back().key)) {
      std::lock_guard lock(items.hints->mu);
      items.hints->ends[static_cast<int>(side)] = p;
    }
  }
  return out;
}

OwnedRead first_end_read(const ItemRange& items, Side side, int limit, bool snapshot) {
  const std::optional<std::string> bound = window_bound(items, side, limit);
  const RangeRead first = first_part(items.begin, items.end, bound, side, limit, snapshot);
  return {std::string(first.begin), std::string(first.end), first.options};
}

std::vector<std::optional<KeyValue>> read_last_of_priorities(
    Transaction& tr, const ItemRange& items, std::span<const std::int64_t> priorities) {
  const Subspace items_space = Subspace::from_raw_prefix(items.begin.substr(0, items.prefix_size));
  std::vector<KeyRange> all;
  std::vector<std::optional<std::string>> bounds;
  for (std::int64_t priority : priorities) {
    all.push_back(items_space.range(Tuple().append(priority)));
    bounds.emplace_back();
    if (!items.hints) continue;
    std::lock_guard lock(items.hints->mu);
    auto it = items.hints->tails.find(priority);
    if (it != items.hints->tails.end())
      bounds.back() = bound_at(items, {priority, it->second}, -kWindow);
  }
  // The window next to each hint (or the whole priority) in one go; then the rest of the
  // priorities whose window was empty, one by one (read_two_parts).
  std::vector<RangeRead> windows;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const bool windowed = bounds[i] && *bounds[i] > all[i].begin && *bounds[i] < all[i].end;
    if (!windowed) bounds[i].reset();
    windows.push_back({bounds[i] ? *bounds[i] : all[i].begin,
                       all[i].end,
                       {.limit = 1, .reverse = true, .snapshot = true}});
  }
  std::vector<std::vector<KeyValue>> near = tr.get_ranges(windows);
  std::vector<std::optional<KeyValue>> out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (near[i].empty() && bounds[i]) {
      near[i] =
          tr.get_range(all[i].begin, *bounds[i], {.limit = 1, .reverse = true, .snapshot = true});
    }
    out.emplace_back();
    if (near[i].empty()) continue;
    remember_tail(items, near[i][0].key);
    out.back() = std::move(near[i][0]);
  }
  return out;
}

std::optional<KeyValue> read_last_of_priority(Transaction& tr, const ItemRange& items,
                                              std::int64_t priority) {
  return std::move(read_last_of_priorities(tr, items, std::span(&priority, 1))[0]);
}

}  // namespace kvq::contention
