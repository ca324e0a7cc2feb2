#include "support/producers_consumers.h"

#include <atomic>
#include <thread>
#include <utility>

namespace kvq::testing {
namespace {

void produce(const ProducersAndConsumers& run, int p, std::vector<history::Push>& out) {
  for (int i = p; i < run.items; i += run.producers) {
    history::Push h{std::to_string(i), run.priority_of(i), history::now_ns(), 0};
    run.push(h);
    h.end = history::now_ns();
    out.push_back(std::move(h));
  }
}

// Pops until answered "empty" twice in a row after the producers were done.
void consume(const ProducersAndConsumers& run, int c, const std::atomic<int>& producing,
             std::vector<history::Pop>& out) {
  for (int k = 0, empties = 0; empties < 2; ++k) {
    const bool done = producing.load() == 0;
    const std::int64_t start = history::now_ns();
    PopOutcome o = run.pop(c, k);
    if (!o.answered) continue;
    empties = (!o.value && done) ? empties + 1 : 0;
    out.push_back({o.kind, std::move(o.value), start, history::now_ns()});
  }
}

}  // namespace

History run_producers_and_consumers(const ProducersAndConsumers& run) {
  std::vector<std::vector<history::Push>> pushes(static_cast<std::size_t>(run.producers));
  std::vector<std::vector<history::Pop>> pops(static_cast<std::size_t>(run.consumers));
  std::atomic<int> producing{run.producers};
  std::vector<std::thread> threads;
  for (int p = 0; p < run.producers; ++p) {
    threads.emplace_back([&, p] {
      produce(run, p, pushes[static_cast<std::size_t>(p)]);
      --producing;
    });
  }
  for (int c = 0; c < run.consumers; ++c) {
    threads.emplace_back([&, c] { consume(run, c, producing, pops[static_cast<std::size_t>(c)]); });
  }
  for (auto& t : threads) t.join();
  return {history::flatten(pushes), history::flatten(pops)};
}

}  // namespace kvq::testing
