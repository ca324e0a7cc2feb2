#include "engine/testing/fault_injection.h"

#include <charconv>

#include "common/clock.h"

namespace kvq::engine {

namespace {

// Why `o` is invalid, or "" if it is valid.
std::string invalid_reason(const FaultInjectionOptions& o) {
  auto bad = [](double p) { return !(p >= 0.0 && p <= 1.0); };
  if (bad(o.unknown_not_applied) || bad(o.unknown_applied) || bad(o.conflict) || bad(o.too_old)) {
    return "fault probabilities must be in [0, 1]";
  }
  if (o.unknown_not_applied + o.unknown_applied + o.conflict > 1.0) {
    return "commit fault probabilities (unknown results and conflicts) sum over 1";
  }
  if (o.commit_delay.count() < 0) return "the commit delay must not be negative";
  return "";
}

void validate(const FaultInjectionOptions& o) {
  const std::string why = invalid_reason(o);
  if (!why.empty()) throw Error(ErrorCode::kInvalidOptionValue, why);
}

[[noreturn]] void bad_parameter(const std::string& name, const std::string& value,
                                const std::string& expected) {
  throw Error(ErrorCode::kConnectionStringInvalid,
              "fault injection: " + name + "=" + value + " is not " + expected);
}

double parse_rate(const std::string& name, const std::string& value) {
  double rate = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), rate);
  if (ec != std::errc() || end != value.data() + value.size() || !(rate >= 0.0 && rate <= 1.0)) {
    bad_parameter(name, value, "a probability in [0, 1]");
  }
  return rate;
}

std::uint64_t parse_count(const std::string& name, const std::string& value, std::uint64_t max) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || n > max) {
    bad_parameter(name, value, "an integer in [0, " + std::to_string(max) + "]");
  }
  return n;
}

// Removes `name` from `query`; its value, or nullopt.
std::optional<std::string> take(std::map<std::string, std::string>& query, const char* name) {
  auto it = query.find(name);
  if (it == query.end()) return std::nullopt;
  std::string value = std::move(it->second);
  query.erase(it);
  return value;
}

}  // namespace

std::optional<FaultInjectionOptions> take_fault_options(std::map<std::string, std::string>& query) {
  FaultInjectionOptions o;
  bool any = false;
  if (auto v = take(query, "unknown_result_rate")) {
    const double rate = parse_rate("unknown_result_rate", *v);
    o.unknown_not_applied = rate / 2;
    o.unknown_applied = rate / 2;
    any = true;
  }
  if (auto v = take(query, "conflict_rate"))
    o.conflict = parse_rate("conflict_rate", *v), any = true;
  if (auto v = take(query, "too_old_rate")) o.too_old = parse_rate("too_old_rate", *v), any = true;
  if (auto v = take(query, "delay_ms")) {
    o.commit_delay = std::chrono::milliseconds(parse_count("delay_ms", *v, 3'600'000));
    any = true;
  }
  if (auto v = take(query, "fault_seed")) {
    o.seed = parse_count("fault_seed", *v, UINT64_MAX);
    any = true;
  }
  if (!any) return std::nullopt;
  const std::string why = invalid_reason(o);
  if (!why.empty()) throw Error(ErrorCode::kConnectionStringInvalid, "fault injection: " + why);
  return o;
}

class FaultInjectionEngine::FaultySession final : public Session {
 public:
  FaultySession(std::shared_ptr<FaultInjectionEngine> owner, std::unique_ptr<Session> base)
      : owner_(std::move(owner)), base_(std::move(base)) {}
  Version read_version() override { return base_->read_version(); }
  std::optional<std::string> get(std::string_view key) override {
    maybe_too_old();
    return base_->get(key);
  }
  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) override {
    maybe_too_old();
    return base_->get_range(begin, end, limit, reverse);
  }
  void prefetch(std::span<const RangeQuery> queries) override { base_->prefetch(queries); }
  void note_absent(std::string_view key) override { base_->note_absent(key); }
  CommitResult commit(CommitRequest request) override {
    const Fault fault = owner_->draw_commit();
    if (fault == Fault::kHeld) {
      // The wrapped session goes with it: it keeps the read version from being released.
      std::lock_guard<std::mutex> lock(owner_->mu_);
      owner_->held_.emplace(Held{std::move(base_), std::move(request)});
      throw Error(ErrorCode::kCommitUnknownResult, "injected fault: commit held, may land later");
    }
    if (fault == Fault::kNotApplied) {
      owner_->not_applied_.fetch_add(1);
      throw Error(ErrorCode::kCommitUnknownResult, "injected fault: commit not applied");
    }
    if (fault == Fault::kConflict) {
      owner_->conflicts_.fetch_add(1);
      throw Error(ErrorCode::kNotCommitted, "injected fault: spurious conflict");
    }
    CommitResult result = base_->commit(std::move(request));
    if (fault == Fault::kApplied) {
      owner_->applied_.fetch_add(1);
      throw Error(ErrorCode::kCommitUnknownResult, "injected fault: commit applied");
    }
    return result;
  }
  std::size_t operations(const std::vector<KeyRange>& read_conflicts,
                         const std::vector<Mutation>& mutations) override {
    return base_->operations(read_conflicts, mutations);
  }

 private:
  void maybe_too_old() {
    if (!owner_->draw_too_old()) return;
    owner_->too_old_.fetch_add(1);
    throw Error(ErrorCode::kTransactionTooOld, "injected fault: read version too old");
  }

  std::shared_ptr<FaultInjectionEngine> owner_;
  std::unique_ptr<Session> base_;
};

FaultInjectionEngine::FaultInjectionEngine(std::shared_ptr<Engine> base,
                                           FaultInjectionOptions options)
    : base_(std::move(base)), options_(options), rng_(options.seed) {
  if (!base_) throw Error(ErrorCode::kInvalidArgument, "FaultInjectionEngine needs an engine");
  validate(options);
}

std::unique_ptr<Session> FaultInjectionEngine::begin() {
  return std::make_unique<FaultySession>(shared_from_this(), base_->begin());
}

void FaultInjectionEngine::watch(std::string key, std::optional<std::string> value_seen,
                                 Version version, std::shared_ptr<detail::WatchState> state) {
  base_->watch(std::move(key), std::move(value_seen), version, std::move(state));
}

std::uint64_t FaultInjectionEngine::commit_batches() const { return base_->commit_batches(); }

TransactionLimits FaultInjectionEngine::limits() const { return base_->limits(); }

void FaultInjectionEngine::set_options(FaultInjectionOptions options) {
  validate(options);
  std::lock_guard<std::mutex> lock(mu_);
  options_ = options;
}

void FaultInjectionEngine::hold_next_commit() {
  std::lock_guard<std::mutex> lock(mu_);
  hold_next_ = true;
}

bool FaultInjectionEngine::land_held() {
  std::optional<Held> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held.swap(held_);
  }
  if (!held) return false;
  try {
    held->session->commit(std::move(held->request));
    return true;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kNotCommitted) return false;
    throw;
  }
}

FaultInjectionEngine::Fault FaultInjectionEngine::draw_commit() {
  Fault fault = Fault::kNone;
  std::chrono::milliseconds delay{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (hold_next_) {
      hold_next_ = false;
      return Fault::kHeld;
    }
    const double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    const double not_applied = options_.unknown_not_applied;
    const double applied = not_applied + options_.unknown_applied;
    if (r < not_applied) {
      fault = Fault::kNotApplied;
    } else if (r < applied) {
      fault = Fault::kApplied;
    } else if (r < applied + options_.conflict) {
      fault = Fault::kConflict;
    }
    delay = options_.commit_delay;
  }
  if (delay.count() > 0) common::clock().sleep_for(delay);
  return fault;
}

bool FaultInjectionEngine::draw_too_old() {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.too_old <= 0.0) return false;
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < options_.too_old;
}

}  // namespace kvq::engine
