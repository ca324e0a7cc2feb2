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
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kvq/database.h"
#include "kvq/error.h"
#include "rpc.grpc.pb.h"
#include "support/etcd_cluster.h"
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

// Runs `op(client, n)` on `clients` threads for `seconds`, counting what each call did.
template <typename Op>
Row run(const std::string& name, int clients, double seconds, Op op) {
  std::atomic<bool> stop{false};
  std::atomic<long> ops{0}, empty{0}, errors{0};
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      long n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        switch (op(c, n++)) {
          case Outcome::kDone:
            ops.fetch_add(1, std::memory_order_relaxed);
            break;
          case Outcome::kEmpty:
            empty.fetch_add(1, std::memory_order_relaxed);
            break;
          case Outcome::kError:
            errors.fetch_add(1, std::memory_order_relaxed);
            break;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
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

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string endpoints;
  std::string kvq_options;  // extra etcd URL options for the kvq rows, e.g. fast_first_read=1
  double seconds = 2.0;
  bool json = false;
  std::vector<int> client_counts = {1, 4, 16};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--endpoints") {
      endpoints = next();
    } else if (a == "--seconds") {
      seconds = std::stod(next());
    } else if (a == "--clients") {
      client_counts = parse_list(next());
    } else if (a == "--kvq-options") {
      kvq_options = next();
    } else if (a == "--json") {
      json = true;
    } else {
      std::cerr << "usage: etcd_bench [--endpoints host:port,...] [--seconds S] "
                   "[--clients 1,4,16] [--kvq-options a=b&c=d] [--json]\n";
      return 2;
    }
  }
  std::unique_ptr<kvq::testing::EtcdCluster> cluster;
  if (endpoints.empty()) {
    cluster = std::make_unique<kvq::testing::EtcdCluster>(1);
    endpoints = cluster->endpoint(0);
  }
  const std::string first_endpoint = endpoints.substr(0, endpoints.find(','));
  const std::string run_id = std::to_string(std::random_device{}());
  auto channel = grpc::CreateChannel(first_endpoint, grpc::InsecureChannelCredentials());
  auto kv = pb::KV::NewStub(channel);
  auto deadline = [](grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  };
  const std::string value(16, 'v');
  std::vector<Row> rows;
  for (int clients : client_counts) {
    rows.push_back(run("raw_put", clients, seconds, [&](int c, long n) {
      pb::PutRequest req;
      req.set_key("bench/" + run_id + "/put/" + std::to_string(c) + "/" + std::to_string(n));
      req.set_value(value);
      pb::PutResponse resp;
      grpc::ClientContext ctx;
      deadline(ctx);
      return done_if(kv->Put(&ctx, req, &resp).ok());
    }));
    rows.push_back(run("raw_txn", clients, seconds, [&](int c, long n) {
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
  auto db = kvq::open("etcd://" + endpoints + "?prefix=bench/" + run_id + "/kvq/" +
                      (kvq_options.empty() ? "" : "&" + kvq_options));
  for (int clients : client_counts) {
    rows.push_back(run("kvq_set", clients, seconds, [&](int c, long n) {
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
    for (int clients : client_counts) {
      kvq::PriorityQueue pq(
          db, kvq::Subspace(kvq::Tuple().append("pq").append(suffix).append(clients)), options);
      rows.push_back(run("pq_push" + suffix, clients, seconds, [&](int c, long n) {
        try {
          pq.push(value, static_cast<std::int64_t>((c * 7919 + n * 104729) % 100));
          return Outcome::kDone;
        } catch (const kvq::Error&) {
          return Outcome::kError;
        }
      }));
      rows.push_back(run("pq_pop" + suffix, clients, seconds, [&](int, long) {
        try {
          return pq.pop_min().has_value() ? Outcome::kDone : Outcome::kEmpty;
        } catch (const kvq::Error&) {
          return Outcome::kError;
        }
      }));
    }
  }
#endif
  const unsigned cores = std::thread::hardware_concurrency();
  if (json) {
    std::printf("{\"cores\": %u, \"endpoints\": \"%s\", \"kvq_options\": \"%s\", \"results\": [",
                cores, endpoints.c_str(), kvq_options.c_str());
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
                cores, endpoints.c_str(), seconds, kvq_options.c_str());
    std::printf("%-12s %8s %10s %8s %8s %12s\n", "op", "clients", "ops", "empty", "errors",
                "ops/s");
    for (const Row& r : rows) {
      std::printf("%-12s %8d %10ld %8ld %8ld %12.1f\n", r.op.c_str(), r.clients, r.ops, r.empty,
                  r.errors, r.rate());
    }
  }
  return 0;
}
