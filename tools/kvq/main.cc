// kvq: command-line access to kvq queues, the demo and the contention benchmark.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "kvq/kvq.h"
#include "tools/kvq/commands.h"

namespace {

constexpr int kExitEmpty = 3;

std::string default_url() {
  if (const char* env = std::getenv("KVQ_DB"); env && *env) return env;
#ifdef KVQ_WITH_ROCKSDB
  return "rocksdb:./kvq-data";
#else
  return "memory:";
#endif
}

std::string escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

int print_optional(const std::optional<std::string>& v, const char* what) {
  if (!v) {
    std::cerr << "kvq: " << what << " is empty\n";
    return kExitEmpty;
  }
  std::cout << *v << "\n";
  return 0;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kvq: shared FIFO and priority queues on a transactional key-value store.\n"
      "Exit status: 0 ok, 1 kvq error or failed check, 2 bad arguments, 3 pop/peek on an empty "
      "queue."};
  app.require_subcommand(1);
  std::string url;
  app.add_option("--db", url,
                 "database URL: memory:, rocksdb:/dir, etcd://host:port[,host:port]. Default: "
#ifdef KVQ_WITH_ROCKSDB
                 "$KVQ_DB, else rocksdb:./kvq-data (a durable database in ./kvq-data, created if "
                 "missing)"
#else
                 "$KVQ_DB, else memory: (this build has no RocksDB: data lives for one command)"
#endif
  );
  bool high_contention = false;
  app.add_flag("--high-contention", high_contention,
               "use high-contention (staged) pops for queue/pq commands");

  // queue
  auto* queue = app.add_subcommand("queue", "operate on a FIFO queue (subspace (\"Q\", NAME))");
  std::string qname = "default";
  queue->add_option("--name", qname, "queue name")->capture_default_str();
  queue->require_subcommand(1);
  std::vector<std::string> qvalues;
  auto* qpush = queue->add_subcommand("push", "append VALUE... at the back (one transaction)");
  qpush->add_option("value", qvalues, "values to push")->required();
  auto* qpop = queue->add_subcommand("pop", "remove and print the front value (exit 3 if empty)");
  auto* qpeek = queue->add_subcommand("peek", "print the front value (exit 3 if empty)");
  auto* qsize = queue->add_subcommand("size", "print the number of items");
  auto* qclear = queue->add_subcommand("clear", "remove every item");

  // pq
  auto* pq = app.add_subcommand("pq", "operate on a priority queue (subspace (\"P\", NAME))");
  std::string pname = "default";
  pq->add_option("--name", pname, "priority queue name")->capture_default_str();
  pq->require_subcommand(1);
  std::string priority_text;
  std::string pvalue;
  auto* ppush = pq->add_subcommand("push", "insert VALUE with --priority P");
  ppush->add_option("--priority,-p", priority_text, "priority (int64)")->required();
  ppush->add_option("value", pvalue, "value to push")->required();
  auto* ppopmin = pq->add_subcommand("pop-min", "remove and print a lowest-priority value (oldest)");
  auto* ppopmax = pq->add_subcommand("pop-max", "remove and print a highest-priority value (newest)");
  auto* ppeekmin = pq->add_subcommand("peek-min", "print what pop-min would return");
  auto* ppeekmax = pq->add_subcommand("peek-max", "print what pop-max would return");
  auto* psize = pq->add_subcommand("size", "print the number of items");
  auto* pclear = pq->add_subcommand("clear", "remove every item");

  // dump
  auto* dump = app.add_subcommand("dump", "print every key (decoded as a tuple) and value");
  std::string dump_prefix;

  // demo
  kvq::cli::DemoOptions demo_opts;
  auto* demo = app.add_subcommand(
      "demo",
      "N clients on one shared PriorityQueue and one Queue (embedded memory engine unless --db "
      "is given); checks the whole history at the end (exit 1 if the check fails)");
  demo->add_option("--clients,-c", demo_opts.clients, "number of client threads")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  demo->add_option("--items,-n", demo_opts.items, "items pushed into each structure")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  bool demo_plain = false;
  demo->add_flag("--plain", demo_plain, "plain pops instead of high-contention pops");
  demo->add_flag("--quiet,-q", demo_opts.quiet, "no live progress line");

  // bench
  kvq::cli::BenchOptions bench_opts;
  auto* bench = app.add_subcommand(
      "bench", "contention benchmark: push/pop ops/s, retries/op, p50/p99 by client count");
  std::string clients_csv = "1,2,4,8,16,32,64", kinds_csv = "queue,pq", modes_csv = "plain,hc",
              ops_csv = "push,pop";
  bench->add_option("--clients", clients_csv, "comma-separated client counts")->capture_default_str();
  bench->add_option("--seconds", bench_opts.seconds, "seconds per measurement")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  bench->add_option("--kinds", kinds_csv, "queue,pq")->capture_default_str();
  bench->add_option("--modes", modes_csv, "plain,hc")->capture_default_str();
  bench->add_option("--ops", ops_csv, "push,pop")->capture_default_str();
  bench->add_option("--prefill", bench_opts.prefill, "items pushed before each pop measurement")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  bench->add_option("--batch-size", bench_opts.batch_size,
                    "high-contention requests served per fulfilment transaction")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  bench->add_flag("--json", bench_opts.json, "print JSON instead of a table");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "kvq: error: " << e.what() << " (see kvq --help)\n";
    return 2;
  }

  const bool db_given = !url.empty();
  if (!db_given) url = default_url();
  try {
    if (*demo) {
      demo_opts.url = db_given ? url : "memory:";
      demo_opts.high_contention = !demo_plain;
      return kvq::cli::run_demo(demo_opts);
    }
    if (*bench) {
      bench_opts.url = db_given ? url : "memory:";
      bench_opts.clients.clear();
      for (const auto& c : split(clients_csv)) {
        int n = 0;
        try {
          std::size_t used = 0;
          n = std::stoi(c, &used);
          if (used != c.size()) n = 0;
        } catch (const std::exception&) {
          n = 0;
        }
        if (n < 1 || n > 4096) {
          std::cerr << "kvq: error: --clients: bad client count '" << c << "'\n";
          return 2;
        }
        bench_opts.clients.push_back(n);
      }
      bench_opts.kinds = split(kinds_csv);
      bench_opts.modes = split(modes_csv);
      bench_opts.ops = split(ops_csv);
      for (const auto& k : bench_opts.kinds) {
        if (k != "queue" && k != "pq") {
          std::cerr << "kvq: error: --kinds: unknown kind '" << k << "'\n";
          return 2;
        }
      }
      for (const auto& m : bench_opts.modes) {
        if (m != "plain" && m != "hc") {
          std::cerr << "kvq: error: --modes: unknown mode '" << m << "'\n";
          return 2;
        }
      }
      for (const auto& o : bench_opts.ops) {
        if (o != "push" && o != "pop") {
          std::cerr << "kvq: error: --ops: unknown op '" << o << "'\n";
          return 2;
        }
      }
      return kvq::cli::run_bench(bench_opts);
    }

    auto db = kvq::open(url);
    if (*queue) {
      kvq::QueueOptions opts;
      opts.high_contention = high_contention;
      kvq::Queue q(db, kvq::Subspace(kvq::Tuple().append("Q").append(qname)), opts);
      if (*qpush) {
        db->run([&](kvq::Transaction& tr) {
          for (const auto& v : qvalues) q.push(tr, v);
        });
        return 0;
      }
      if (*qpop) return print_optional(q.pop(), "queue");
      if (*qpeek) return print_optional(q.peek(), "queue");
      if (*qsize) {
        std::cout << q.size() << "\n";
        return 0;
      }
      if (*qclear) {
        q.clear();
        return 0;
      }
    }
    if (*pq) {
      kvq::PriorityQueueOptions opts;
      opts.high_contention = high_contention;
      kvq::PriorityQueue p(db, kvq::Subspace(kvq::Tuple().append("P").append(pname)), opts);
      if (*ppush) {
        std::int64_t priority = 0;
        auto [end, ec] = std::from_chars(priority_text.data(),
                                         priority_text.data() + priority_text.size(), priority);
        if (ec != std::errc() || end != priority_text.data() + priority_text.size()) {
          std::cerr << "kvq: error: --priority: '" << priority_text << "' is not an int64\n";
          return 2;
        }
        p.push(pvalue, priority);
        return 0;
      }
      if (*ppopmin) return print_optional(p.pop_min(), "priority queue");
      if (*ppopmax) return print_optional(p.pop_max(), "priority queue");
      if (*ppeekmin) return print_optional(p.peek_min(), "priority queue");
      if (*ppeekmax) return print_optional(p.peek_max(), "priority queue");
      if (*psize) {
        std::cout << p.size() << "\n";
        return 0;
      }
      if (*pclear) {
        p.clear();
        return 0;
      }
    }
    if (*dump) {
      std::string begin = dump_prefix;
      const std::string end = "\xff";
      for (;;) {
        auto kvs = db->run([&](kvq::Transaction& tr) {
          return tr.get_range(begin, end, {.limit = 1000, .snapshot = true});
        });
        for (const auto& kv : kvs) {
          std::string key;
          try {
            key = kvq::Tuple::unpack(kv.key).to_string();
          } catch (const kvq::Error&) {
            key = "b\"" + escape(kv.key) + "\"";
          }
          std::cout << key << " = \"" << escape(kv.value) << "\"\n";
        }
        if (kvs.size() < 1000) break;
        begin = kvs.back().key + '\x00';
      }
      return 0;
    }
  } catch (const kvq::Error& e) {
    std::cerr << "kvq: error: " << e.name() << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kvq: error: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "kvq: error: nothing to do (see kvq --help)\n";
  return 2;
}
