// The kvq CLI's subcommands that are more than a one-liner.
#ifndef KVQ_TOOLS_KVQ_COMMANDS_H_
#define KVQ_TOOLS_KVQ_COMMANDS_H_

#include <string>
#include <vector>

namespace kvq::cli {

struct DemoOptions {
  std::string url = "memory:";
  int clients = 8;
  int items = 20000;  // per structure (Queue and PriorityQueue each)
  bool high_contention = true;
  bool quiet = false;  // no live progress line
};
// Runs the demo; prints progress to stderr and the summary to stdout. Returns the exit status
// (0 if the history check passed, 1 otherwise).
int run_demo(const DemoOptions& options);

struct BenchOptions {
  std::string url = "memory:";
  std::vector<int> clients = {1, 2, 4, 8, 16, 32, 64};
  double seconds = 1.0;
  std::vector<std::string> kinds = {"queue", "pq"};
  std::vector<std::string> modes = {"plain", "hc"};
  std::vector<std::string> ops = {"push", "pop"};
  int prefill = 100000;
  int batch_size = 128;  // HighContentionOptions::batch_size
  bool json = false;
};
// Runs the contention benchmark; table (or JSON) on stdout. Returns the exit status.
int run_bench(const BenchOptions& options);

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_COMMANDS_H_
