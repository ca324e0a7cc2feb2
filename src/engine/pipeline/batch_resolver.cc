#include "engine/pipeline/batch_resolver.h"

#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "common/bytes.h"
#include "engine/pipeline/read_versions.h"

namespace kvq::pipeline {
namespace {

using engine::Mutation;
using engine::MutationType;

// The state of the keys that atomic ops of the batch read, as earlier writes of the batch left
// them. Only those keys are kept: a write to any other key is never read back while resolving,
// and copying every written key and value (a map node and two strings each) cost more than the
// rest of the resolve phase.
class BatchOverlay {
 public:
  BatchOverlay(const VersionedStore* store, const std::vector<Writer*>& batch) : store_(store) {
    for (const Writer* w : batch) {
      for (const Mutation& m : w->request->mutations) {
        if (m.type == MutationType::kAddValue) points_.try_emplace(m.param1);
      }
    }
  }

  void set(std::string_view key, const std::optional<std::string>& value) {
    auto it = points_.find(key);
    if (it != points_.end()) it->second = {value, true};
  }
  void clear_range(const std::string& begin, const std::string& end) {
    if (!(begin < end)) return;
    for (auto it = points_.lower_bound(begin); it != points_.end() && it->first < end; ++it) {
      it->second = {std::nullopt, true};
    }
  }
  // The value of `key`, one of the batch's atomic-op keys.
  std::optional<std::string> get(const std::string& key) {
    auto it = points_.find(key);
    if (it != points_.end() && it->second.written) return it->second.value;
    if (!base_) base_ = store_->snapshot();
    return base_->get(key);
  }

 private:
  struct Point {
    std::optional<std::string> value;
    bool written = false;  // by an earlier write of the batch; else the store's value holds
  };
  const VersionedStore* store_;
  std::shared_ptr<const StoreSnapshot> base_;
  std::map<std::string, Point, std::less<>> points_;
};

// Appends a plain set of `key` to `value`, recording it in the overlay.
void put(BatchOverlay& overlay, std::vector<StoreWrite>& writes, std::string key,
         std::string value) {
  overlay.set(key, value);
  writes.push_back({StoreWrite::Kind::kSet, std::move(key), std::move(value)});
}

// Phase "resolve" of one committed transaction: its mutations as plain writes.
void resolve_mutations(std::vector<Mutation>& mutations, const std::string& stamp,
                       BatchOverlay& overlay, std::vector<StoreWrite>& writes) {
  for (Mutation& m : mutations) {
    switch (m.type) {
      case MutationType::kSet:
        put(overlay, writes, std::move(m.param1), std::move(m.param2));
        break;
      case MutationType::kClear:
        overlay.set(m.param1, std::nullopt);
        writes.push_back({StoreWrite::Kind::kClear, std::move(m.param1), {}});
        break;
      case MutationType::kClearRange:
        overlay.clear_range(m.param1, m.param2);
        writes.push_back({StoreWrite::Kind::kClearRange, std::move(m.param1), std::move(m.param2)});
        break;
      case MutationType::kAddValue: {
        std::string value = common::add_le(overlay.get(m.param1), m.param2);
        put(overlay, writes, std::move(m.param1), std::move(value));
        break;
      }
      case MutationType::kSetVersionstampedKey:
        put(overlay, writes, *common::splice_versionstamp(m.param1, stamp), std::move(m.param2));
        break;
      case MutationType::kSetVersionstampedValue:
        put(overlay, writes, std::move(m.param1), *common::splice_versionstamp(m.param2, stamp));
        break;
    }
  }
}

// Whether every versionstamp offset of `request` lies inside its key or value; adds the write
// conflicts of its versionstamped keys.
bool stamp_request(engine::CommitRequest& request, const std::string& stamp) {
  for (const Mutation& m : request.mutations) {
    if (m.type == MutationType::kSetVersionstampedKey) {
      std::optional<std::string> key = common::splice_versionstamp(m.param1, stamp);
      if (!key) return false;
      request.write_conflicts.push_back({*key, common::key_after(*key)});
    } else if (m.type == MutationType::kSetVersionstampedValue &&
               !common::splice_versionstamp(m.param2, stamp)) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string BatchResolver::versionstamp(Version version, std::size_t order) {
  std::string stamp = common::encode_be64(static_cast<std::uint64_t>(version));
  stamp.push_back(static_cast<char>((order >> 8) & 0xff));
  stamp.push_back(static_cast<char>(order & 0xff));
  return stamp;
}

std::vector<CheckerTransaction> BatchResolver::stamp(std::vector<Writer*>& batch,
                                                     const std::vector<std::string>& stamps) {
  std::vector<CheckerTransaction> input(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    engine::CommitRequest& req = *batch[i]->request;
    if (!stamp_request(req, stamps[i])) {
      batch[i]->error =
          Error(ErrorCode::kClientInvalidOperation, "versionstamp offset outside the key or value");
      continue;  // an empty checker entry: recorded as nothing
    }
    input[i] = {req.read_version, &req.read_conflicts, &req.write_conflicts};
  }
  return input;
}

bool BatchResolver::accept(Writer& w, ConflictChecker::Outcome outcome) {
  if (w.error) return false;  // malformed
  switch (outcome) {
    case ConflictChecker::Outcome::kCommitted:
      return true;
    case ConflictChecker::Outcome::kTooOld:
      w.error = ReadVersions::too_old(w.request->read_version);
      return false;
    case ConflictChecker::Outcome::kConflict:
      w.error = Error(ErrorCode::kNotCommitted,
                      "a key read by the transaction was written by a concurrent commit");
      return false;
  }
  return false;
}

ResolvedBatch BatchResolver::run(std::vector<Writer*>& batch, Version version) {
  std::vector<std::string> stamps(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) stamps[i] = versionstamp(version, i);
  const std::vector<CheckerTransaction> input = stamp(batch, stamps);
  const std::vector<ConflictChecker::Outcome> outcomes = checker_->resolve(input, version);
  ResolvedBatch out;
  BatchOverlay overlay(store_, batch);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Writer& w = *batch[i];
    if (!accept(w, outcomes[i])) continue;
    resolve_mutations(w.request->mutations, stamps[i], overlay, out.writes);
    w.result.version = version;
    w.result.versionstamp = stamps[i];
    out.any_committed = true;
  }
  return out;
}

}  // namespace kvq::pipeline
