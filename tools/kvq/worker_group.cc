#include "tools/kvq/worker_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "tools/kvq/cli.h"

extern char** environ;

namespace kvq::cli {
namespace {

using Clock = std::chrono::steady_clock;

// How long a worker that closed its stdout may take to exit.
constexpr std::chrono::seconds kExitTimeout{5};

// "exited with status 1", "was killed by signal 9".
std::string describe(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

WorkerGroup::WorkerGroup(const std::vector<std::vector<std::string>>& argvs, std::string what)
    : what_(std::move(what)) {
  workers_.reserve(argvs.size());
  for (const auto& argv : argvs) spawn(argv);
}

WorkerGroup::~WorkerGroup() {
  kill_all();
  for (Worker& w : workers_) {
    close_fd(w.stdin_fd);
    close_fd(w.stdout_fd);
  }
}

void WorkerGroup::spawn(const std::vector<std::string>& argv) {
  // stdin: a socket pair, so that writing to a worker that died fails with EPIPE instead of
  // raising SIGPIPE (send with MSG_NOSIGNAL); stdout: a pipe. All ends close on exec: a worker
  // holds only its own two, dup'ed onto 0 and 1 (dup2 clears close-on-exec).
  int in[2], out[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
    fail(std::string("socketpair: ") + std::strerror(errno));
  }
  if (pipe2(out, O_CLOEXEC) != 0) {
    const int err = errno;
    close(in[0]);
    close(in[1]);
    fail(std::string("pipe2: ") + std::strerror(err));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  Worker w;
  const int rc = posix_spawn(&w.pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[1]);
  close(out[1]);
  w.stdin_fd = in[0];
  w.stdout_fd = out[0];
  if (rc != 0) {
    close_fd(w.stdin_fd);
    close_fd(w.stdout_fd);
    fail("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  workers_.push_back(w);
}

void WorkerGroup::start_together(std::chrono::milliseconds timeout) {
  read_until(
      Clock::now() + timeout, [](const Worker& w) { return w.out.find('\n') != std::string::npos; },
      "before it was ready");
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const char go = 'g';
    if (send(workers_[i].stdin_fd, &go, 1, MSG_NOSIGNAL) != 1) {
      fail("cannot start " + name(i) + ": " + std::strerror(errno));
    }
  }
}

std::vector<std::string> WorkerGroup::finish(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  read_until(
      deadline, [](const Worker& w) { return w.stdout_fd < 0; }, "before it finished");
  std::vector<std::string> outputs;
  for (const Worker& w : workers_) {
    outputs.push_back(w.out.substr(std::min(w.out.size(), w.out.find('\n') + 1)));
  }
  return outputs;
}

void WorkerGroup::read_until(Clock::time_point deadline,
                             const std::function<bool(const Worker&)>& done,
                             const std::string& stage) {
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (done(workers_[i])) continue;
      if (workers_[i].stdout_fd < 0) fail(name(i) + " exited with status 0 " + stage);
      fds.push_back({workers_[i].stdout_fd, POLLIN, 0});
      index.push_back(i);
    }
    if (fds.empty()) return;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    const int ready =
        left.count() > 0 ? poll(fds.data(), fds.size(), static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail(std::string("poll: ") + std::strerror(errno));
    if (ready == 0) fail(name(index.front()) + " did not answer in time " + stage);
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Worker& w = workers_[index[k]];
      char buf[65536];
      const ssize_t n = read(w.stdout_fd, buf, sizeof buf);
      if (n > 0) {
        w.out.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {  // it exited (or will): a failure stops the group now
        close_fd(w.stdout_fd);
        reap(index[k], Clock::now() + kExitTimeout, stage);
      }
    }
  }
}

void WorkerGroup::reap(std::size_t i, Clock::time_point deadline, const std::string& stage) {
  Worker& w = workers_[i];
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(w.pid, &status, WNOHANG);
    if (r == w.pid) break;
    if (r < 0 && errno != EINTR) fail("waitpid of " + name(i) + ": " + std::strerror(errno));
    if (Clock::now() >= deadline) fail(name(i) + " did not exit in time " + stage);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  w.reaped = true;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail(name(i) + " " + describe(status) + " " + stage + " (its own error, if any, is above)");
  }
}

void WorkerGroup::fail(const std::string& message) {
  kill_all();
  throw CliError(kExitError, what_ + ": " + message);
}

std::string WorkerGroup::name(std::size_t i) const {
  return "worker " + std::to_string(i + 1) + " of " + std::to_string(workers_.size()) + " (pid " +
         std::to_string(workers_[i].pid) + ")";
}

void WorkerGroup::kill_all() {
  for (Worker& w : workers_) {
    if (w.reaped || w.pid <= 0) continue;
    ::kill(w.pid, SIGKILL);
    int status = 0;
    while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    w.reaped = true;
  }
}

}  // namespace kvq::cli
