// Test helper: run another program (fork+exec) and read its output, or kill it.
#ifndef KVQ_TESTS_SUPPORT_SUBPROCESS_H_
#define KVQ_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kvq::testing {

// A child process started with fork+exec; its stdout is a pipe the parent reads, its stderr is
// inherited. The destructor SIGKILLs and reaps it if still running. Not thread-safe.
class Subprocess {
 public:
  // Starts argv[0] (a path) with arguments argv. Throws std::runtime_error if fork/exec fails
  // (exec failures show as exit status 127).
  explicit Subprocess(const std::vector<std::string>& argv);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `signal` to the child (no-op once reaped).
  void kill(int signal);
  // The next line of stdout (without the newline), waiting at most `timeout` for it; nullopt on
  // timeout or EOF (a final unterminated line is returned on EOF).
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Reads all of stdout until EOF, then waits for the child. Returns the raw wait status (the same
  // one again on later calls).
  int wait();
  // The child's stdout read so far (complete after wait()).
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string output_;
  std::size_t line_start_ = 0;  // read_line() has returned output_[0, line_start_)
};

// Runs argv to completion; returns its exit code (128 + signal if killed) and stdout in *output.
int run_program(const std::vector<std::string>& argv, std::string* output);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_SUBPROCESS_H_
