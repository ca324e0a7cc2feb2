// Helper program of tests/work_queue_crash_test.cc: one worker of a work queue, meant to be killed
// with SIGKILL while it holds leases.
//
//   work_queue_worker <url> <vt_ms> <work_ms>
//
// Opens <url> and the Queue under subspace ("wq"), prints "ready", then loops: take a lease of
// <vt_ms> and print "took <n>"; sleep <work_ms> (the work); then, in one transaction, ack the lease
// and add 1 to the item's effect counter ("effects", <n>) for the item "item-<n>", and print
// "acked <n>" (so a worker killed after "took" without "acked" held a lease). A lease_lost ack
// (the lease ran out and the item went to another worker) is skipped, printing "lost <n>". Exits 0
// once nothing is ready, leased or delayed; 70 with a message on stderr if anything else throws.
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include "kvq/kvq.h"

namespace {

bool drained(kvq::Queue& q) {
  const kvq::QueueStats s = q.stats();
  return s.ready == 0 && s.leased == 0 && s.delayed == 0;
}

void work(const std::string& url, std::chrono::milliseconds vt, std::chrono::milliseconds pause) {
  auto db = kvq::open(url);
  kvq::Queue q(db, kvq::Subspace(kvq::Tuple().append("wq")));
  const kvq::Subspace effects(kvq::Tuple().append("effects"));
  std::cout << "ready" << std::endl;
  for (;;) {
    auto lease = q.take(vt);
    if (!lease) {
      if (drained(q)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    const int n = std::stoi(lease->value.substr(lease->value.find('-') + 1));
    std::cout << "took " << n << std::endl;
    std::this_thread::sleep_for(pause);
    try {
      db->run([&](kvq::Transaction& tr) {
        q.ack(tr, *lease);
        tr.atomic_add(effects.pack(kvq::Tuple().append(n)), std::int64_t{1});
      });
      std::cout << "acked " << n << std::endl;
    } catch (const kvq::Error& e) {
      if (e.code() != kvq::ErrorCode::kLeaseLost) throw;
      std::cout << "lost " << n << std::endl;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: work_queue_worker <url> <vt_ms> <work_ms>\n");
    return 2;
  }
  try {
    work(argv[1], std::chrono::milliseconds(std::stol(argv[2])),
         std::chrono::milliseconds(std::stol(argv[3])));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "work_queue_worker: %s\n", e.what());
    return 70;
  }
}
