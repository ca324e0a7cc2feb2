// Internal (etcd engine): one transaction attempt on etcd. Its first read fixes its read version
// (an etcd revision; linearizable unless fast_first_read=1); later reads are Ranges at that
// revision. It remembers every record it read (for the deletion pins of its commit) and the key
// ranges its reads covered, and commits through a Committer. A read-conflict range that no read
// covered (an explicit one) is read at commit first, so that its records are pinned too.
//
// Example:
//   EtcdSession s(cluster);
//   std::optional<std::string> v = s.get("k");
//   s.commit(request);
#ifndef KVQ_SRC_ENGINE_ETCD_ETCD_SESSION_H_
#define KVQ_SRC_ENGINE_ETCD_ETCD_SESSION_H_

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/etcd/cluster.h"
#include "engine/etcd/txn_builder.h"

namespace kvq::engine::etcd {

// A Session over a Cluster. Used by one thread at a time (Session's contract).
class EtcdSession : public Session {
 public:
  explicit EtcdSession(std::shared_ptr<Cluster> cluster) : cluster_(std::move(cluster)) {}

  Version read_version() override;
  std::optional<std::string> get(std::string_view key) override;
  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) override;
  // Sends the first page request of each query's read_records in one read-only Txn (at this
  // session's revision; the first read of the session fixes it) and keeps the answers for those
  // reads; a query of one key with no limit (is_point_read) is asked as get() asks it, and
  // answers get() of that key too; a query fetched already is not asked again
  // (a layer may hint reads that a get_ranges then hints too). Best effort: if the Txn fails, the
  // reads go one by one and report their own errors.
  void prefetch(std::span<const RangeQuery> queries) override;
  // Marks [key, key_after(key)) covered: it holds no record to pin.
  void note_absent(std::string_view key) override;
  CommitResult commit(CommitRequest request) override;
  // What etcd counts against --max-txn-ops for a commit of these reads and writes now (see
  // txn_operations): compares and write ops are counted, not built; values are not copied.
  std::size_t operations(const std::vector<KeyRange>& read_conflicts,
                         const std::vector<Mutation>& mutations) override;

 private:
  // A read at this session's revision (the first read fixes the revision), answered from the
  // prefetched responses if one was fetched for this very request. Records every etcd record
  // seen, for the deletion pins at commit.
  etcdserverpb::RangeResponse read(etcdserverpb::RangeRequest& request, std::string_view what);
  // Sets what a read at this session's revision asks (revision, serializable).
  void pin_to_revision(etcdserverpb::RangeRequest& request) const;
  // Notes the revision and records of a response to a read of this session (`what` names the read
  // in the error a response without a revision throws).
  void note_response(const etcdserverpb::RangeResponse& response, std::string_view what);
  // The request get(key) sends: the key's base record and its delta records.
  etcdserverpb::RangeRequest point_request(std::string_view key) const;
  // True if `query` reads exactly one key, with no limit, forward: [k, key_after(k)).
  static bool is_point_read(const RangeQuery& query);
  // The first page request read_records makes for [from, to).
  static etcdserverpb::RangeRequest page_request(std::string from, std::string to, int limit,
                                                 bool reverse);
  // The etcd records of [from, to) (already encoded), in pages, until `limit` whole kvq keys
  // (base and every delta) are in hand (0 = all). `whole_range` (optional) is set to whether
  // they are all of [from, to).
  google::protobuf::RepeatedPtrField<mvccpb::KeyValue> read_records(std::string from,
                                                                    std::string to, int limit,
                                                                    bool reverse,
                                                                    bool* whole_range = nullptr);
  // Notes that every record of kvq keys [begin, end) is in seen_ (a read at the revision covered
  // it).
  void covered(std::string_view begin, std::string_view end);
  // Notes what a get_range(begin, end, limit, reverse) that returned `got` covered
  // (`whole_range`: its records are all of [begin, end)).
  void note_covered(std::string_view begin, std::string_view end, int limit, bool reverse,
                    bool whole_range, const std::vector<KeyValue>& got);
  // Reads, at this session's revision, the parts of `read_conflicts` no read covered (explicit
  // read-conflict ranges), so that the commit pins their records and catches their deletion.
  void pin_unread(const std::vector<KeyRange>& read_conflicts);
  // True if `records` hold more than `limit` distinct kvq keys (the last maybe incomplete).
  bool holds_whole_keys(const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& records,
                        int limit) const;

  std::shared_ptr<Cluster> cluster_;
  Version revision_ = -1;
  SeenRecords seen_;
  std::vector<KeyRange> covered_;  // kvq key ranges whose every record is in seen_
  // Answers of prefetch(), by the serialized request they answer (pinned to the session's
  // revision, so each answers every read of that request).
  std::map<std::string, etcdserverpb::RangeResponse> prefetched_;
};

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_ETCD_SESSION_H_
