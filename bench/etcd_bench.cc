// etcd_bench: raw etcd rates next to kvq's rates on the same etcd, in one run.
//
//   raw_put   one etcd Put RPC per op (no kvq)
//   raw_txn   one etcd Txn RPC per op: compare(mod_revision < huge) + put (no kvq)
//   kvq_set   a kvq transaction: read one key, set one key (one Range + one Txn)
//   pq_push   kvq::PriorityQueue::push (random priority 0..99)
//   pq_pop    kvq::PriorityQueue::pop_min on a prefilled queue
//   pq_push_comb, pq_pop_comb   the same with flat combining (PriorityQueueOptions::combine): the
//             threads pushing (popping) at once share one etcd Txn
// at 1, 4 and 16 client threads. Starts its own 1-member etcd on free loopback ports (data on
// $TMPDIR, --unsafe-no-fsync) unless --endpoints host:port[,...] is given.
//
// Usage: etcd_bench [--endpoints host:port,...] [--seconds S] [--clients 1,4,16]
//                   [--kvq-options fast_first_read=1] [--json]
// --seconds: a decimal number, 0.01..3600 (default 2); --clients: 1..4096 each. The kvq database
// is opened (and the options checked) before anything is measured. Exit status: 0 done, 1 an
// error (etcd did not start or answer, a kvq error), 2 bad arguments (nothing was measured).
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvq/database.h"
#include "kvq/error.h"
#include "rpc.grpc.pb.h"
#include "support/etcd_cluster.h"
#include "tools/kvq/bench_args.h"
#if __has_include("kvq/priority_queue.h")
#include "kvq/priority_queue.h"
#include "kvq/subspace.h"
#include "kvq/tuple.h"
#define KVQ_BENCH_HAVE_PQ 1
#endif

namespace {

namespace pb = ::etcdserverpb;

// What one call of an op did.
enum class Outcome { kDone, kEmpty, kError };  // kEmpty: a pop found the queue empty

struct Row {
  std::string op;
  int clients = 0;
  long ops = 0;
  long empty = 0;
  long errors = 0;
  double seconds = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
};

// Runs `op(client, n)` on `clients` threads for `seconds`, counting what each call did. Throws
// the first exception an op threw, after stopping the other threads.
template <typename Op>
Row run(const std::string& name, int clients, double seconds, Op op) {
  std::atomic<bool> stop{false};
  kvq::bench_args::FirstError error(stop);
  std::atomic<long> ops{0}, empty{0}, errors{0};
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      error.run([&] {
        for (long n = 0; !stop.load(std::memory_order_relaxed); ++n) {
          const Outcome o = op(c, n);
          (o == Outcome::kDone    ? ops
           : o == Outcome::kEmpty ? empty
                                  : errors)
              .fetch_add(1, std::memory_order_relaxed);
        }
      });
    });
  }
  kvq::bench_args::sleep_unless_stopped(stop, seconds);
  stop = true;
  for (auto& t : threads) t.join();
  error.rethrow();
  Row r;
  r.op = name;
  r.clients = clients;
  r.ops = ops;
  r.empty = empty;
  r.errors = errors;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Outcome done_if(bool ok) { return ok ? Outcome::kDone : Outcome::kError; }

constexpr const char* kUsage =
    "usage: etcd_bench [--endpoints host:port,...] [--seconds S] [--clients 1,4,16] "
    "[--kvq-options a=b&c=d] [--json]\n";

// The command line.
struct Options {
  std::string endpoints;    // empty: start a 1-member etcd
  std::string kvq_options;  // extra etcd URL options for the kvq rows, e.g. fast_first_read=1
  double seconds = 2.0;
  bool json = false;
  bool help = false;
  std::vector<int> client_counts = {1, 4, 16};
};

// Throws UsageError naming the argument that is not one kUsage shows.
Options parse_options(int argc, char** argv) {
  using kvq::bench_args::UsageError;
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto next = [&]() -> std::string_view {
      if (i + 1 >= argc) throw UsageError(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "--endpoints") {
      o.endpoints = next();
      if (o.endpoints.empty()) throw UsageError("--endpoints: must not be empty");
    } else if (a == "--seconds") {
      o.seconds = kvq::bench_args::parse_number("--seconds", next(), 0.01, 3600);
    } else if (a == "--clients") {
      o.client_counts = kvq::bench_args::parse_int_list("--clients", next(), 1, 4096);
    } else if (a == "--kvq-options") {
      o.kvq_options = next();
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else {
      throw UsageError("unknown argument '" + std::string(a) + "'");
    }
  }
  return o;
}

// The raw_put and raw_txn rows: etcd's own rates, one RPC per op on the first endpoint.
void raw_rows(const Options& o, const std::string& endpoints, const std::string& run_id,
              std::vector<Row>& rows) {
  const std::string first_endpoint = endpoints.substr(0, endpoints.find(','));
  auto channel = grpc::CreateChannel(first_endpoint, grpc::InsecureChannelCredentials());
  auto kv = pb::KV::NewStub(channel);
  auto deadline = [](grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  };
  const std::string value(16, 'v');
  for (int clients : o.client_counts) {
    rows.push_back(run("raw_put", clients, o.seconds, [&](int c, long n) {
      pb::PutRequest req;
      req.set_key("bench/" + run_id + "/put/" + std::to_string(c) + "/" + std::to_string(n));
      req.set_value(value);
      pb::PutResponse resp;
      grpc::ClientContext ctx;
      deadline(ctx);
      return done_if(kv->Put(&ctx, req, &resp).ok());
    }));
    rows.push_back(run("raw_txn", clients, o.seconds, [&](int c, long n) {
      std::string key = "bench/" + run_id + "/txn/" + std::to_string(c) + "/" + std::to_string(n);
      pb::TxnRequest req;
      pb::Compare* cmp = req.add_compare();
      cmp->set_key(key);
      cmp->set_target(pb::Compare::MOD);
      cmp->set_result(pb::Compare::LESS);
      cmp->set_mod_revision(INT64_MAX);
      pb::PutRequest* put = req.add_success()->mutable_request_put();
      put->set_key(key);
      put->set_value(value);
      pb::TxnResponse resp;
      grpc::ClientContext ctx;
      deadline(ctx);
      return done_if(kv->Txn(&ctx, req, &resp).ok() && resp.succeeded());
    }));
  }
}

// The kvq rows on `db`: kvq_set, then (if built) the PriorityQueue rows.
void kvq_rows(const Options& o, const std::shared_ptr<kvq::Database>& db, std::vector<Row>& rows) {
  const std::string value(16, 'v');
  for (int clients : o.client_counts) {
    rows.push_back(run("kvq_set", clients, o.seconds, [&](int c, long n) {
      try {
        db->run([&](kvq::Transaction& tr) {
          std::string key = "set/" + std::to_string(c) + "/" + std::to_string(n);
          tr.get(key);
          tr.set(key, value);
        });
        return Outcome::kDone;
      } catch (const kvq::Error&) {
        return Outcome::kError;
      }
    }));
  }
#ifdef KVQ_BENCH_HAVE_PQ
  for (bool combine : {false, true}) {
    const std::string suffix = combine ? "_comb" : "";
    kvq::PriorityQueueOptions options;
    options.combine = combine;
    for (int clients : o.client_counts) {
      kvq::PriorityQueue pq(
          db, kvq::Subspace(kvq::Tuple().append("pq").append(suffix).append(clients)), options);
      rows.push_back(run("pq_push" + suffix, clients, o.seconds, [&](int c, long n) {
        try {
          pq.push(value, static_cast<std::int64_t>((c * 7919 + n * 104729) % 100));
          return Outcome::kDone;
        } catch (const kvq::Error&) {
          return Outcome::kError;
        }
      }));
      rows.push_back(run("pq_pop" + suffix, clients, o.seconds, [&](int, long) {
        try {
          return pq.pop_min().has_value() ? Outcome::kDone : Outcome::kEmpty;
        } catch (const kvq::Error&) {
          return Outcome::kError;
        }
      }));
    }
  }
#endif
}

void print_rows(const Options& o, const std::string& endpoints, const std::vector<Row>& rows) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (o.json) {
    std::printf("{\"cores\": %u, \"endpoints\": \"%s\", \"kvq_options\": \"%s\", \"results\": [",
                cores, endpoints.c_str(), o.kvq_options.c_str());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf(
          "%s{\"op\": \"%s\", \"clients\": %d, \"ops\": %ld, \"empty\": %ld, "
          "\"errors\": %ld, \"seconds\": %.3f, \"ops_per_s\": %.1f}",
          i ? ", " : "", r.op.c_str(), r.clients, r.ops, r.empty, r.errors, r.seconds, r.rate());
    }
    std::printf("]}\n");
  } else {
    std::printf("etcd_bench: %u cores, etcd at %s, %.1f s per measurement, kvq options '%s'\n",
                cores, endpoints.c_str(), o.seconds, o.kvq_options.c_str());
    std::printf("%-12s %8s %10s %8s %8s %12s\n", "op", "clients", "ops", "empty", "errors",
                "ops/s");
    for (const Row& r : rows) {
      std::printf("%-12s %8d %10ld %8ld %8ld %12.1f\n", r.op.c_str(), r.clients, r.ops, r.empty,
                  r.errors, r.rate());
    }
  }
}

// Starts etcd unless --endpoints named one, opens the kvq database (a bad --kvq-options or an
// etcd that does not answer fails here, before any row), then measures and prints every row.
int run_bench(const Options& o) {
  std::unique_ptr<kvq::testing::EtcdCluster> cluster;
  std::string endpoints = o.endpoints;
  if (endpoints.empty()) {
    const char* bin = std::getenv("ETCD_BIN");
    struct stat st {};
    if (bin != nullptr && *bin != '\0' &&
        (stat(bin, &st) != 0 || !S_ISREG(st.st_mode) || access(bin, X_OK) != 0)) {
      throw std::runtime_error(std::string("ETCD_BIN=") + bin + " is not an executable file");
    }
    cluster = std::make_unique<kvq::testing::EtcdCluster>(1);
    endpoints = cluster->endpoint(0);
  }
  const std::string run_id = std::to_string(std::random_device{}());
  auto db = kvq::bench_args::open_url(
      o.kvq_options.empty() ? "--endpoints" : "--endpoints or --kvq-options",
      "etcd://" + endpoints + "?prefix=bench/" + run_id + "/kvq/" +
          (o.kvq_options.empty() ? "" : "&" + o.kvq_options));
  std::vector<Row> rows;
  raw_rows(o, endpoints, run_id, rows);
  kvq_rows(o, db, rows);
  print_rows(o, endpoints, rows);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Errors: kvq::Error ("name (code): message"), etcd not starting.
  return kvq::bench_args::run_main("etcd_bench", kUsage, [&] {
    const Options o = parse_options(argc, argv);
    if (o.help) {
      std::printf("%s", kUsage);
      return 0;
    }
    return run_bench(o);
  });
}
