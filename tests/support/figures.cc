#include "support/figures.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "engine/testing/fault_injection.h"

namespace kvq::testing {

void record_figure(std::string_view name, std::int64_t value) {
  const char* path = std::getenv("KVQ_FIGURES_FILE");
  if (path == nullptr || *path == '\0') return;
  const std::string line = std::string(name) + "\t" + std::to_string(value) + "\n";
  const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  // One write of a short line to an O_APPEND file: lines from parallel tests never interleave.
  [[maybe_unused]] const ssize_t written = ::write(fd, line.data(), line.size());
  ::close(fd);
}

void record_fault_counts(std::int64_t unknown_applied, std::int64_t unknown_not_applied,
                         std::int64_t conflicts, std::int64_t too_old) {
  record_figure("faults: commit_unknown_result, applied", unknown_applied);
  record_figure("faults: commit_unknown_result, not applied", unknown_not_applied);
  record_figure("faults: spurious not_committed", conflicts);
  record_figure("faults: transaction_too_old on a read", too_old);
}

void record_faults(const Database& db) {
  const auto faulty = std::dynamic_pointer_cast<engine::FaultInjectionEngine>(db.engine());
  if (!faulty) return;
  auto count = [](std::uint64_t n) { return static_cast<std::int64_t>(n); };
  record_fault_counts(count(faulty->injected_applied()), count(faulty->injected_not_applied()),
                      count(faulty->injected_conflicts()), count(faulty->injected_too_old()));
}

void record_history(const history::Result& result) {
  record_figure(kOperationsChecked,
                result.pushed + result.popped + result.empty_pops + result.remaining);
  record_figure(kViolations, result.violations);
}

}  // namespace kvq::testing
