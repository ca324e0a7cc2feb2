#include "support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kvq::testing {

Subprocess::Subprocess(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("Subprocess: empty argv");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  // Build argv before fork: the child may only call async-signal-safe functions.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(err));
  }
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the new descriptor.
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  stdout_fd_ = fds[0];
}

Subprocess::~Subprocess() {
  if (!reaped_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

void Subprocess::kill(int signal) {
  if (!reaped_ && pid_ > 0) ::kill(pid_, signal);
}

std::optional<std::string> Subprocess::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::size_t nl = output_.find('\n', line_start_);
    if (nl != std::string::npos) {
      std::string line = output_.substr(line_start_, nl - line_start_);
      line_start_ = nl + 1;
      return line;
    }
    if (stdout_fd_ < 0) {
      if (line_start_ < output_.size()) {
        std::string line = output_.substr(line_start_);
        line_start_ = output_.size();
        return line;
      }
      return std::nullopt;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{stdout_fd_, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (r == 0) return std::nullopt;
    char buf[4096];
    const ssize_t n = read(stdout_fd_, buf, sizeof buf);
    if (n > 0) {
      output_.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      close(stdout_fd_);
      stdout_fd_ = -1;
    }
  }
}

int Subprocess::wait() {
  if (stdout_fd_ >= 0) {
    char buf[4096];
    for (;;) {
      ssize_t n = read(stdout_fd_, buf, sizeof buf);
      if (n > 0) {
        output_.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
    close(stdout_fd_);
    stdout_fd_ = -1;
  }
  if (!reaped_) {
    while (waitpid(pid_, &status_, 0) < 0) {
      if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    }
    reaped_ = true;
  }
  return status_;
}

int run_program(const std::vector<std::string>& argv, std::string* output) {
  Subprocess child(argv);
  const int status = child.wait();
  if (output != nullptr) *output = child.output();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace kvq::testing
