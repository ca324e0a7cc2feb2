// Pack/unpack speed of a typical priority-queue key: subspace ("P"), priority, count, 20 random
// bytes. Google Benchmark; `--json` (or `--benchmark_format=json`) prints JSON. items_per_second is
// packs (or unpacks) per second on one thread.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/subspace.h"
#include "kvq/tuple.h"

namespace {

constexpr int kKeys = 1024;

struct QueueKeys {
  kvq::Subspace subspace{kvq::Tuple().append("P")};
  std::vector<kvq::Tuple> tuples;   // (priority, count, 20 random bytes)
  std::vector<std::string> packed;  // subspace.pack(tuple)

  QueueKeys() {
    std::mt19937_64 rng(1);
    for (int i = 0; i < kKeys; ++i) {
      std::string random(20, '\0');
      for (char& c : random) c = static_cast<char>(rng());
      kvq::Tuple t;
      t.append(static_cast<std::int64_t>(rng() % 1000))
          .append(static_cast<std::int64_t>(rng() % 1000000));
      t.append(kvq::Bytes(random));
      packed.push_back(subspace.pack(t));
      tuples.push_back(std::move(t));
    }
  }
};

const QueueKeys& Keys() {
  static const QueueKeys keys;
  return keys;
}

// Subspace::pack of a ready tuple: what a push does per key.
void BM_SubspacePack(benchmark::State& state) {
  const QueueKeys& k = Keys();
  std::size_t i = 0;
  for (auto _ : state) {
    std::string key = k.subspace.pack(k.tuples[i++ % kKeys]);
    benchmark::DoNotOptimize(key);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SubspacePack);

// Building the tuple and packing it into a reused buffer.
void BM_BuildAndPackInto(benchmark::State& state) {
  const QueueKeys& k = Keys();
  std::string out;
  std::size_t i = 0;
  for (auto _ : state) {
    const kvq::Tuple& src = k.tuples[i++ % kKeys];
    kvq::Tuple t;
    t.append(src.get_int(0)).append(src.get_int(1)).append(src.get_bytes(2));
    out.assign(k.subspace.key());
    t.pack_into(out);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BuildAndPackInto);

// Tuple::pack without a prefix.
void BM_TuplePack(benchmark::State& state) {
  const QueueKeys& k = Keys();
  std::size_t i = 0;
  for (auto _ : state) {
    std::string key = k.tuples[i++ % kKeys].pack();
    benchmark::DoNotOptimize(key);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TuplePack);

// Subspace::unpack of a packed key: what a pop does per key read.
void BM_SubspaceUnpack(benchmark::State& state) {
  const QueueKeys& k = Keys();
  std::size_t i = 0;
  for (auto _ : state) {
    kvq::Tuple t = k.subspace.unpack(k.packed[i++ % kKeys]);
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SubspaceUnpack);

// Comparing two keys in tuple order (element-wise, no packing).
void BM_TupleCompare(benchmark::State& state) {
  const QueueKeys& k = Keys();
  std::size_t i = 0;
  for (auto _ : state) {
    const bool less = k.tuples[i % kKeys] < k.tuples[(i + 1) % kKeys];
    ++i;
    benchmark::DoNotOptimize(less);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TupleCompare);

}  // namespace

// `--json` is accepted as a short form of `--benchmark_format=json`.
int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  static char kJsonFlag[] = "--benchmark_format=json";
  for (char*& a : args) {
    if (std::string_view(a) == "--json") a = kJsonFlag;
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
