// Worker processes started and released together, for `kvq bench --processes` (cmd_bench.cc): the
// parent starts each worker (this binary re-executed), waits until each printed a first line (it is
// ready), writes one byte to every worker's stdin so that they begin at once, then reads what each
// printed until it exits. A worker that fails, or a deadline that passes, kills them all by pid:
// nothing hangs and nothing is left running.
//
//   WorkerGroup workers({{"/proc/self/exe", "bench", ...}, {"/proc/self/exe", "bench", ...}},
//                       "bench");
//   workers.start_together(std::chrono::seconds(60));
//   std::vector<std::string> outputs = workers.finish(std::chrono::seconds(120));
#ifndef KVQ_TOOLS_KVQ_WORKER_GROUP_H_
#define KVQ_TOOLS_KVQ_WORKER_GROUP_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace kvq::cli {

class WorkerGroup {
 public:
  // Starts one worker per entry of `argvs` (argv[0]: the program's path), each with its stdin and
  // stdout connected to this process, its stderr shared with ours. Throws CliError(kExitError)
  // if one cannot be started (the workers already started are killed). Messages begin with
  // `what` (the command, "bench").
  WorkerGroup(const std::vector<std::vector<std::string>>& argvs, std::string what);
  // SIGKILLs and reaps every worker still running; closes the connections.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Waits until every worker printed its first line, then writes one byte to each worker's stdin.
  // Throws CliError(kExitError) naming the worker, after killing them all, if one exits first or
  // `timeout` passes.
  void start_together(std::chrono::milliseconds timeout);
  // Reads each worker's stdout until it closes it, and reaps it; returns what each printed after
  // its first line, in the order of `argvs`. Throws CliError(kExitError) naming the worker, after
  // killing them all, as soon as one exits with a status other than 0 or by a signal, or when
  // `timeout` passes.
  std::vector<std::string> finish(std::chrono::milliseconds timeout);

 private:
  struct Worker {
    pid_t pid = -1;
    int stdin_fd = -1;   // our end of the worker's stdin (a socket: writing never raises SIGPIPE)
    int stdout_fd = -1;  // our end of the worker's stdout; -1 once it closed it
    std::string out;     // what it printed so far
    bool reaped = false;
  };

  void spawn(const std::vector<std::string>& argv);
  // Reads the workers' stdout until `done` holds for each. A worker that closes its stdout is
  // reaped at once: one that failed, or exited before `done` held, or `deadline` passing, fails
  // the group (`stage` says when, in the message).
  void read_until(std::chrono::steady_clock::time_point deadline,
                  const std::function<bool(const Worker&)>& done, const std::string& stage);
  // Reaps worker i (waiting until `deadline`); fails the group unless it exited with status 0.
  void reap(std::size_t i, std::chrono::steady_clock::time_point deadline,
            const std::string& stage);
  // Kills every worker, then throws CliError(kExitError) with "what: message".
  [[noreturn]] void fail(const std::string& message);
  // "worker 2 of 4 (pid 1234)".
  std::string name(std::size_t i) const;
  void kill_all();

  std::string what_;
  std::vector<Worker> workers_;
};

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_WORKER_GROUP_H_
