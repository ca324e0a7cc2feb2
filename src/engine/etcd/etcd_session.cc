#include "engine/etcd/etcd_session.h"

#include <algorithm>

#include "common/bytes.h"
#include "engine/etcd/collapse.h"
#include "engine/etcd/committer.h"
#include "engine/etcd/delta_folder.h"
#include "engine/etcd/key_group.h"
#include "engine/etcd/responses.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;
using Records = google::protobuf::RepeatedPtrField<mvccpb::KeyValue>;

Version EtcdSession::read_version() {
  if (revision_ < 0) {
    pb::RangeRequest request;
    request.set_key(cluster_->codec().encode(""));
    request.set_count_only(true);
    read(request, "read version");
  }
  return revision_;
}

std::optional<std::string> EtcdSession::get(std::string_view key) {
  pb::RangeRequest request = point_request(key);
  pb::RangeResponse response = read(request, "get");
  covered(key, common::key_after(key));
  std::vector<KeyGroup> groups = group_records(cluster_->codec(), response.kvs());
  if (groups.empty()) return std::nullopt;
  if (groups[0].deltas.size() >= DeltaFolder::kFoldOnRead) {
    DeltaFolder(*cluster_).fold(groups[0].key, DeltaFolder::kFoldOnRead);
  }
  return groups[0].value();
}

std::vector<KeyValue> EtcdSession::get_range(std::string_view begin, std::string_view end,
                                             int limit, bool reverse) {
  if (begin >= end) {
    read_version();
    return {};
  }
  Records records;
  bool whole_range = true;  // the records are all of [begin, end)
  if (is_point_read({begin, end, limit, reverse})) {
    // Asked as get() asks it (so a prefetched point read answers either); never a second page.
    pb::RangeRequest request = point_request(begin);
    records = std::move(*read(request, "get_range").mutable_kvs());
  } else {
    records = read_records(cluster_->codec().encode(begin), cluster_->codec().encode(end), limit,
                           reverse, &whole_range);
  }
  std::vector<KeyValue> out;
  for (const KeyGroup& g : group_records(cluster_->codec(), records)) {
    std::optional<std::string> value = g.value();
    if (!value) continue;
    if (g.deltas.size() >= DeltaFolder::kFoldOnRead) {
      DeltaFolder(*cluster_).fold(g.key, DeltaFolder::kFoldOnRead);
    }
    out.push_back(KeyValue{g.key, std::move(*value)});
    if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
  }
  note_covered(begin, end, limit, reverse, whole_range, out);
  return out;
}

void EtcdSession::covered(std::string_view begin, std::string_view end) {
  covered_.push_back({std::string(begin), std::string(end)});
}

void EtcdSession::note_covered(std::string_view begin, std::string_view end, int limit,
                               bool reverse, bool whole_range, const std::vector<KeyValue>& got) {
  if (limit > 0 && static_cast<int>(got.size()) >= limit) {
    // Cut at the limit: the records of the keys up to the last one returned (read whole).
    if (reverse) {
      covered(got.back().key, end);
    } else {
      covered(begin, common::key_after(got.back().key));
    }
  } else if (whole_range) {
    covered(begin, end);
  }
}

void EtcdSession::pin_unread(const std::vector<KeyRange>& read_conflicts) {
  if (revision_ < 0 || read_conflicts.empty()) return;  // no read version: no compares (Committer)
  for (const KeyRange& part : common::subtract_ranges(read_conflicts, covered_)) {
    read_records(cluster_->codec().encode(part.begin), cluster_->codec().encode(part.end), 0,
                 false);
  }
}

pb::RangeRequest EtcdSession::point_request(std::string_view key) const {
  pb::RangeRequest request;
  std::string base = cluster_->codec().encode(key);
  request.set_range_end(KeyCodec::group_end(base));
  request.set_key(std::move(base));
  return request;
}

bool EtcdSession::is_point_read(const RangeQuery& query) {
  // end == key_after(begin), without building it (every get_range asks this).
  return query.limit == 0 && !query.reverse && query.end.size() == query.begin.size() + 1 &&
         query.end.back() == '\0' && query.end.starts_with(query.begin);
}

pb::RangeRequest EtcdSession::page_request(std::string from, std::string to, int limit,
                                           bool reverse) {
  pb::RangeRequest request;
  request.set_key(std::move(from));
  request.set_range_end(std::move(to));
  if (limit > 0) request.set_limit(std::max(limit + 1, 16));
  if (reverse) {
    request.set_sort_order(pb::RangeRequest::DESCEND);
    request.set_sort_target(pb::RangeRequest::KEY);
  }
  return request;
}

Records EtcdSession::read_records(std::string from, std::string to, int limit, bool reverse,
                                  bool* whole_range) {
  Records records;
  for (;;) {
    pb::RangeRequest request = page_request(from, to, limit, reverse);
    pb::RangeResponse response = read(request, "get_range");
    const bool more = response.more() && response.kvs_size() > 0;
    std::string last = response.kvs_size() > 0 ? response.kvs(response.kvs_size() - 1).key() : "";
    for (mvccpb::KeyValue& kv : *response.mutable_kvs()) records.Add(std::move(kv));
    if (whole_range) *whole_range = !more;
    // A key is whole once a record of a later key (in scan order) was seen or the range is done.
    if (!more || (limit > 0 && holds_whole_keys(records, limit))) return records;
    if (reverse) {
      to = std::move(last);
    } else {
      from = common::key_after(last);
    }
  }
}

bool EtcdSession::holds_whole_keys(const Records& records, int limit) const {
  int keys = 0;
  std::optional<std::string> previous;
  for (const mvccpb::KeyValue& kv : records) {
    std::optional<DecodedKey> d = cluster_->codec().decode(kv.key());
    if (!d) continue;
    if (!previous || d->key != *previous) ++keys;
    previous = std::move(d->key);
  }
  return keys > limit;
}

void EtcdSession::note_absent(std::string_view key) { covered(key, common::key_after(key)); }

CommitResult EtcdSession::commit(CommitRequest request) {
  pin_unread(request.read_conflicts);
  return Committer(*cluster_, seen_).commit(std::move(request));
}

std::size_t EtcdSession::operations(const std::vector<KeyRange>& read_conflicts,
                                    const std::vector<Mutation>& mutations) {
  const TxnBuilder builder(cluster_->codec());
  const std::size_t compares = builder.count_conflict_compares(revision_, read_conflicts, seen_);
  const Collapsed shape = collapse(mutations, "", CollapseMode::kShapeOnly);
  const std::size_t writes = builder.count_write_ops(shape, shape.needs_stamp);
  return txn_operations(compares, writes, shape.needs_stamp);
}

void EtcdSession::prefetch(std::span<const RangeQuery> queries) {
  const std::size_t max_ops = std::max<std::size_t>(cluster_->options().max_txn_ops, 1);
  pb::TxnRequest txn;
  for (const RangeQuery& q : queries) {
    if (static_cast<std::size_t>(txn.success_size()) == max_ops) break;
    // A read of exactly one key is asked the way get() asks it, so that it answers get() too.
    pb::RangeRequest request =
        is_point_read(q) ? point_request(q.begin)
                         : page_request(cluster_->codec().encode(q.begin),
                                        cluster_->codec().encode(q.end), q.limit, q.reverse);
    pin_to_revision(request);
    if (prefetched_.contains(request.SerializeAsString())) continue;  // fetched already
    *txn.add_success()->mutable_request_range() = std::move(request);
  }
  if (txn.success_size() == 0) return;
  pb::TxnResponse response;
  if (!cluster_->read_txn(txn, &response).ok() || response.responses_size() != txn.success_size()) {
    return;
  }
  const Version revision = response.header().revision();
  if (revision <= 0) return;  // no revision: let the reads go alone and report it
  if (revision_ < 0) {
    // The Txn is this session's first read: it fixes the read version, as read() would.
    if (txn.success(0).request_range().serializable() && revision < cluster_->latest_seen()) {
      return;  // answered from behind what this process already saw: let the reads go alone
    }
    revision_ = revision;
    cluster_->saw(revision_);
  }
  for (int i = 0; i < response.responses_size(); ++i) {
    pb::RangeRequest request = txn.success(i).request_range();
    pin_to_revision(request);  // as read() will ask it, now that the revision is fixed
    pb::RangeResponse* range = response.mutable_responses(i)->mutable_response_range();
    *range->mutable_header() = response.header();  // a Txn answers all its ranges at one revision
    prefetched_[request.SerializeAsString()] = std::move(*range);
  }
}

void EtcdSession::pin_to_revision(pb::RangeRequest& request) const {
  if (revision_ >= 0) {
    request.set_revision(revision_);
    request.set_serializable(true);
  } else if (cluster_->options().fast_first_read) {
    request.set_serializable(true);
  }
}

pb::RangeResponse EtcdSession::read(pb::RangeRequest& request, std::string_view what) {
  pin_to_revision(request);
  if (auto it = prefetched_.find(request.SerializeAsString()); it != prefetched_.end()) {
    // Kept for a repeat of the request: pinned to one revision, it has the same answer.
    pb::RangeResponse response = it->second;
    note_response(response, what);
    return response;
  }
  pb::RangeResponse response = cluster_->range(request, what);
  if (revision_ < 0 && request.serializable() &&
      response.header().revision() < cluster_->latest_seen()) {
    // The member answered from behind what this process already saw: ask the leader.
    request.set_serializable(false);
    response = cluster_->range(request, what);
  }
  note_response(response, what);
  return response;
}

void EtcdSession::note_response(const pb::RangeResponse& response, std::string_view what) {
  if (revision_ < 0) {
    revision_ = response_revision(response.header(), what);
    cluster_->saw(revision_);
  }
  for (const mvccpb::KeyValue& kv : response.kvs()) seen_[kv.key()] = kv.mod_revision();
}

}  // namespace kvq::engine::etcd
