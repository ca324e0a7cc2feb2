#include "layers/contention/markers.h"

#include <algorithm>

#include "client/transaction_access.h"
#include "common/random.h"
#include "kvq/tuple.h"
#include "layers/contention/control.h"

namespace kvq::detail {
namespace {

constexpr std::size_t kRandomSize = 20;  // as the recipes' os.urandom(20)
// Past this many, the oldest finished markers are forgotten here (left to the age sweep).
constexpr std::size_t kMaxPending = 4096;
// Bounds of the destructor's clearing transaction.
constexpr TransactionOptions kCleanupOptions{.timeout = std::chrono::milliseconds(5000),
                                             .retry_limit = 5};

}  // namespace

Markers::Markers(std::shared_ptr<Database> db, const Subspace& control,
                 std::chrono::milliseconds ttl)
    : db_(std::move(db)),
      control_(control),
      sweep_begin_(control.pack(Tuple().append("mark")) + '\x00'),
      ttl_(ttl),
      needed_(db_->commits_can_be_unknown()) {}

Markers::~Markers() {
  try {
    std::vector<std::string> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(pending_);
    }
    if (left.empty()) return;
    db_->run(
        [&](Transaction& tr) {
          for (const auto& k : left) tr.clear(k);
        },
        kCleanupOptions);
  } catch (...) {
    // Best effort (see the contract); the age sweep removes what is left.
  }
}

std::string Markers::make() const {
  if (!needed_) return {};
  return control_.pack(Tuple()
                           .append("mark")
                           .append(contention::now_ms())
                           .append(Bytes(common::random_bytes(kRandomSize))));
}

std::vector<std::string> Markers::write(Transaction& tr, const std::string& marker,
                                        std::size_t attempt, std::size_t max_clears) {
  std::vector<std::string> cleared;
  if (!marker.empty()) {
    // The marker is made of random bytes: absent unless an earlier attempt wrote it, and then
    // run_once has read it (written_by) before this attempt.
    detail::TransactionAccess::add_read_conflict_on_absent_key(tr, marker);
    tr.set(marker, std::to_string(attempt));
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t n = std::min(pending_.size(), max_clears);
    cleared.assign(pending_.end() - static_cast<std::ptrdiff_t>(n), pending_.end());
  }
  for (const auto& k : cleared) tr.clear(k);
  if (common::random_u64() % 64 == 0) {
    const std::int64_t cut = contention::now_ms() - static_cast<std::int64_t>(ttl_.count());
    tr.clear_range(sweep_begin_, control_.pack(Tuple().append("mark").append(cut)));
  }
  return cleared;
}

void Markers::finished(const std::string& marker, const std::vector<std::string>& cleared) {
  if (marker.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& k : cleared) {
    auto it = std::find(pending_.begin(), pending_.end(), k);
    if (it != pending_.end()) pending_.erase(it);
  }
  pending_.push_back(marker);
  if (pending_.size() > kMaxPending) pending_.erase(pending_.begin());
}

std::size_t Markers::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

}  // namespace kvq::detail
