// Helper program of tests/rocksdb_crash_test.cc: a push/pop workload on a Queue and a
// PriorityQueue of a durable database, logging every operation, meant to be killed with SIGKILL.
// Producers pause 0-2 ms between pushes so that the consumers keep up and the queues stay short.
//
//   rocksdb_crash_worker <url> <log_path> <run_id> <seed>
//
// Opens <url>, prints "ready" on stdout, then runs until killed: per layout ("Q" = Queue under
// subspace ("Q"), "P" = PriorityQueue under ("P")) two producer and two consumer threads.
// Every operation appends lines to <log_path> (O_APPEND, one write(2) per line, so a line is either
// wholly in the file or absent; a write(2) that returned survives the process being killed):
//   B push <L> <value>          before the push starts (the value may be in the store from now on)
//   A push <L> <value>          after push() returned: acknowledged
//   B pop <L> <consumer>        before a pop starts
//   A pop <L> <consumer> <value>|-   after pop returned (- = the queue was empty)
// Values are "<L>.<run_id>.<producer>.<n>": unique across runs, never containing spaces.
// Exits 70 with a message on stderr if anything throws (the test then fails: nothing may throw).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kvq/database.h"
#include "kvq/priority_queue.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"
#include "kvq/tuple.h"

namespace {

int g_log_fd = -1;

void log_line(const std::string& line) {
  const std::string text = line + "\n";
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = write(g_log_fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::fprintf(stderr, "rocksdb_crash_worker: log write failed: %s\n", std::strerror(errno));
      std::_Exit(71);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

[[noreturn]] void die(const char* where, const std::exception& e) {
  std::fprintf(stderr, "rocksdb_crash_worker: %s: %s\n", where, e.what());
  std::fflush(stderr);
  std::_Exit(70);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: rocksdb_crash_worker <url> <log_path> <run_id> <seed>\n");
    return 64;
  }
  const std::string url = argv[1];
  const std::string run_id = argv[3];
  const unsigned seed = static_cast<unsigned>(std::stoul(argv[4]));
  g_log_fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (g_log_fd < 0) {
    std::fprintf(stderr, "rocksdb_crash_worker: open %s: %s\n", argv[2], std::strerror(errno));
    return 66;
  }
  std::shared_ptr<kvq::Database> db;
  try {
    db = kvq::open(url);
  } catch (const std::exception& e) {
    die("open", e);
  }
  kvq::Queue queue(db, kvq::Subspace(kvq::Tuple().append("Q")));
  kvq::PriorityQueue pq(db, kvq::Subspace(kvq::Tuple().append("P")));
  std::printf("ready\n");
  std::fflush(stdout);

  constexpr int kProducers = 2;
  constexpr int kConsumers = 2;
  std::vector<std::thread> threads;
  for (const char* layout : {"Q", "P"}) {
    const bool is_queue = layout[0] == 'Q';
    for (int p = 0; p < kProducers; ++p) {
      threads.emplace_back([&, layout, is_queue, p] {
        std::mt19937 rng(seed * 7919u + static_cast<unsigned>(p) * 31u + (is_queue ? 0u : 17u));
        for (long n = 0;; ++n) {
          const std::string value = std::string(layout) + "." + run_id + "." + std::to_string(p) +
                                    "." + std::to_string(n);
          log_line(std::string("B push ") + layout + " " + value);
          try {
            if (is_queue) {
              queue.push(value);
            } else {
              pq.push(value, static_cast<std::int64_t>(rng() % 5));
            }
          } catch (const std::exception& e) {
            die("push", e);
          }
          log_line(std::string("A push ") + layout + " " + value);
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        }
      });
    }
    for (int c = 0; c < kConsumers; ++c) {
      threads.emplace_back([&, layout, is_queue, c] {
        const std::string consumer = std::string(layout) + std::to_string(c);
        for (long n = 0;; ++n) {
          log_line(std::string("B pop ") + layout + " " + consumer);
          std::optional<std::string> v;
          try {
            if (is_queue) {
              v = queue.pop();
            } else {
              v = (n % 2 == 0) ? pq.pop_min() : pq.pop_max();
            }
          } catch (const std::exception& e) {
            die("pop", e);
          }
          log_line(std::string("A pop ") + layout + " " + consumer + " " + (v ? *v : "-"));
          if (!v) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
    }
  }
  for (auto& t : threads) t.join();  // never: the threads run until the process is killed
  return 0;
}
