// `kvq demo`: producers and consumers on one shared Queue and one shared PriorityQueue, then a
// check of the whole history (tools/kvq/history.h).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "tools/kvq/commands.h"
#include "tools/kvq/history.h"

namespace kvq::cli {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int run_demo(const DemoOptions& o) {
  auto db = kvq::open(o.url);
  std::random_device rd;
  const std::int64_t run = static_cast<std::int64_t>(rd() & 0x7fffffff);
  QueueOptions qopts;
  qopts.high_contention = o.high_contention;
  PriorityQueueOptions popts;
  popts.high_contention = o.high_contention;
  Queue queue(db, Subspace(Tuple().append("demo").append(run).append("Q")), qopts);
  PriorityQueue pq(db, Subspace(Tuple().append("demo").append(run).append("P")), popts);

  const int producers = o.clients / 2;
  const int consumers = o.clients - producers;
  std::vector<std::vector<history::Push>> qpush(producers), ppush(producers);
  std::vector<std::vector<history::Pop>> qpop(consumers), ppop(consumers);
  std::atomic<std::int64_t> pushed{0}, popped{0};
  std::atomic<int> producers_left{producers};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::string first_error;
  auto record_error = [&](const std::exception& e) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (first_error.empty()) first_error = e.what();
    failed = true;
  };
  const DatabaseStats before = db->stats();
  const auto t0 = std::chrono::steady_clock::now();

  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 gen(static_cast<unsigned>(p * 7919 + 1));
      std::uniform_int_distribution<int> prio(0, 99);
      try {
        for (int i = p; i < o.items && !failed; i += producers) {
          history::Push a{"q" + std::to_string(i), 0, now_ns(), 0};
          queue.push(a.value);
          a.end = now_ns();
          qpush[p].push_back(std::move(a));
          history::Push b{"p" + std::to_string(i), prio(gen), now_ns(), 0};
          pq.push(b.value, b.priority);
          b.end = now_ns();
          ppush[p].push_back(std::move(b));
          pushed += 2;
        }
      } catch (const std::exception& e) {
        record_error(e);
      }
      --producers_left;
    });
  }
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      try {
        int empties_after_done = 0;
        for (std::uint64_t n = 0; !failed; ++n) {
          const bool done = producers_left.load() == 0;
          history::Pop q{history::PopKind::kFifo, std::nullopt, now_ns(), 0};
          q.value = queue.pop();
          q.end = now_ns();
          const bool min = (n + static_cast<std::uint64_t>(c)) % 2 == 0;
          history::Pop p{min ? history::PopKind::kMin : history::PopKind::kMax, std::nullopt,
                         now_ns(), 0};
          p.value = min ? pq.pop_min() : pq.pop_max();
          p.end = now_ns();
          popped += (q.value ? 1 : 0) + (p.value ? 1 : 0);
          const bool both_empty = !q.value && !p.value;
          qpop[c].push_back(std::move(q));
          ppop[c].push_back(std::move(p));
          if (done && both_empty) {
            if (++empties_after_done >= 2) break;
          } else {
            empties_after_done = 0;
          }
        }
      } catch (const std::exception& e) {
        record_error(e);
      }
    });
  }
  std::atomic<bool> finished{false};
  std::thread progress([&] {
    const bool tty = isatty(2);
    while (!finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (o.quiet) continue;
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      DatabaseStats st = db->stats();
      std::fprintf(stderr, "%s  %5.1fs  pushed %lld/%d  popped %lld  conflicts %llu%s",
                   tty ? "\r" : "", s, static_cast<long long>(pushed.load()), 2 * o.items,
                   static_cast<long long>(popped.load()),
                   static_cast<unsigned long long>(st.conflicts - before.conflicts),
                   tty ? "   " : "\n");
    }
    if (!o.quiet && tty) std::fprintf(stderr, "\n");
  });
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  finished = true;
  progress.join();
  const DatabaseStats after = db->stats();

  if (failed) {
    std::cout << "kvq demo: FAIL: a client stopped with an error: " << first_error << "\n";
    return 1;
  }
  // Whatever is still queued (nothing, if the consumers drained everything) counts as remaining.
  std::vector<std::string> qleft, pleft;
  while (auto v = queue.pop()) qleft.push_back(*v);
  while (auto v = pq.pop_min()) pleft.push_back(*v);
  auto flatten = [](auto& vv) {
    std::remove_reference_t<decltype(vv[0])> all;
    for (auto& v : vv) all.insert(all.end(), v.begin(), v.end());
    return all;
  };
  history::Result qr = history::check(flatten(qpush), flatten(qpop), qleft);
  history::Result pr = history::check(flatten(ppush), flatten(ppop), pleft);
  std::int64_t mins = 0, maxs = 0;
  for (auto& v : ppop) {
    for (auto& p : v) {
      if (!p.value) continue;
      (p.kind == history::PopKind::kMin ? mins : maxs)++;
    }
  }
  const std::int64_t ops = qr.pushed + pr.pushed + qr.popped + pr.popped;
  const std::uint64_t conflicts = after.conflicts - before.conflicts;
  std::printf("kvq demo: %d clients (%d producers, %d consumers), %s pops, %s\n", o.clients,
              producers, consumers, o.high_contention ? "high-contention" : "plain",
              o.url.c_str());
  std::printf("  Queue:          %lld pushed, %lld popped, %lld left over, %lld violations\n",
              static_cast<long long>(qr.pushed), static_cast<long long>(qr.popped),
              static_cast<long long>(qr.remaining), static_cast<long long>(qr.violations));
  std::printf(
      "  PriorityQueue:  %lld pushed, %lld popped (%lld pop_min, %lld pop_max), %lld left over, "
      "%lld violations\n",
      static_cast<long long>(pr.pushed), static_cast<long long>(pr.popped),
      static_cast<long long>(mins), static_cast<long long>(maxs),
      static_cast<long long>(pr.remaining), static_cast<long long>(pr.violations));
  std::printf("  %.2f s, %.0f ops/s, %llu conflicts retried (%.3f per op)\n", secs, ops / secs,
              static_cast<unsigned long long>(conflicts),
              ops ? static_cast<double>(conflicts) / static_cast<double>(ops) : 0.0);
  const bool ok = qr.ok && pr.ok;
  for (const auto& p : qr.problems) std::printf("  Queue problem: %s\n", p.c_str());
  for (const auto& p : pr.problems) std::printf("  PriorityQueue problem: %s\n", p.c_str());
  if (ok) {
    std::printf(
        "  verdict: PASS (every item popped exactly once, none lost, FIFO and priority order "
        "held)\n");
  } else {
    std::printf("  verdict: FAIL\n");
  }
  return ok ? 0 : 1;
}

}  // namespace kvq::cli
