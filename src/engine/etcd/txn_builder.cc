#include "engine/etcd/txn_builder.h"

#include <algorithm>

#include "common/bytes.h"

namespace kvq::engine::etcd {
namespace {

namespace pb = ::etcdserverpb;

// Receives the write operations of a commit in order (so counting and building share one walk).
class WriteSink {
 public:
  virtual ~WriteSink() = default;
  virtual void put(std::string key, const std::string& value) = 0;
  virtual void delete_range(std::string from, std::string to) = 0;
};

class BuildSink : public WriteSink {
 public:
  void put(std::string key, const std::string& value) override {
    pb::PutRequest* put = out.ops.emplace_back().mutable_request_put();
    put->set_key(std::move(key));
    put->set_value(value);
    out.has_put = true;
  }
  void delete_range(std::string from, std::string to) override {
    pb::DeleteRangeRequest* del = out.ops.emplace_back().mutable_request_delete_range();
    del->set_key(std::move(from));
    del->set_range_end(std::move(to));
  }
  WriteOps out;
};

class CountSink : public WriteSink {
 public:
  void put(std::string, const std::string&) override {
    ++ops;
    has_put = true;
  }
  void delete_range(std::string, std::string) override { ++ops; }
  std::size_t ops = 0;
  bool has_put = false;
};

// The walk over a collapsed transaction's writes, emitting etcd ops into a sink.
class WriteWalk {
 public:
  WriteWalk(const KeyCodec& codec, const Collapsed& c, WriteSink& sink)
      : codec_(codec), c_(c), sink_(sink) {}

  void run(bool with_deltas_ids) {
    for (const KeyRange& r : c_.cleared) clear_range(r);
    for (const auto& [key, value] : c_.final_values) final_value(key, value);
    deltas(with_deltas_ids);
  }

 private:
  void delete_range(std::string from, std::string to) {
    if (from < to) sink_.delete_range(std::move(from), std::move(to));
  }

  // A cleared range, split around the keys set after the clear (each key's old deltas still go).
  void clear_range(const KeyRange& r) {
    std::string from = codec_.encode(r.begin);
    for (auto it = c_.final_values.lower_bound(r.begin);
         it != c_.final_values.end() && it->first < r.end; ++it) {
      if (!it->second) continue;  // a delete inside the range: covered by it
      std::string base = codec_.encode(it->first);
      delete_range(std::move(from), base);
      from = std::move(base);
      from.push_back('\0');
    }
    delete_range(std::move(from), codec_.encode(r.end));
  }

  bool in_cleared(const std::string& key) const {
    auto it = std::upper_bound(c_.cleared.begin(), c_.cleared.end(), key,
                               [](const std::string& k, const KeyRange& r) { return k < r.begin; });
    if (it == c_.cleared.begin()) return false;
    --it;
    return key < it->end;
  }

  void final_value(const std::string& key, const std::optional<std::string>& value) {
    std::string base = codec_.encode(key);
    if (value) {
      sink_.put(std::move(base), *value);  // a new base hides the key's older delta records
    } else if (!in_cleared(key)) {
      std::string end = KeyCodec::group_end(base);
      delete_range(std::move(base), std::move(end));
    }
  }

  void deltas(bool with_ids) {
    const std::string id_prefix = with_ids ? random_delta_id().substr(0, 8) : std::string(8, '\0');
    std::uint64_t seq = 0;
    for (const auto& [key, operands] : c_.deltas) {
      for (const std::string& operand : operands) {
        sink_.put(codec_.encode(key) + id_prefix + common::encode_be64(seq++), operand);
      }
    }
  }

  const KeyCodec& codec_;
  const Collapsed& c_;
  WriteSink& sink_;
};

// Walks the compares of conflict_compares: range(from, to) per read-conflict range, then
// pin(record) per record seen inside it.
template <typename RangeFn, typename PinFn>
void walk_compares(const KeyCodec& codec, const std::vector<KeyRange>& read_conflicts,
                   const SeenRecords& seen, RangeFn&& range, PinFn&& pin) {
  for (const KeyRange& r : read_conflicts) {
    const std::string from = codec.encode(r.begin);
    const std::string to = codec.encode(r.end);
    range(from, to);
    // Deletions leave nothing to compare: pin every record the transaction saw in the range.
    for (auto it = seen.lower_bound(from); it != seen.end() && it->first < to; ++it) pin(*it);
  }
}

}  // namespace

std::size_t txn_operations(std::size_t compares, std::size_t writes, bool stamped) {
  const std::size_t failure_ops = compares > 0 ? 1 : 0;  // the compaction probe
  if (!stamped) return std::max({compares, writes, failure_ops});
  // Outer: compares, one success op (the nested Txn), the probe. Nested: one compare, the
  // writes, one failure op (the sequencer read).
  return std::max<std::size_t>(compares, 1) + std::max<std::size_t>(writes, 1);
}

std::vector<pb::Compare> TxnBuilder::conflict_compares(Version read_version,
                                                       const std::vector<KeyRange>& read_conflicts,
                                                       const SeenRecords& seen) const {
  std::vector<pb::Compare> out;
  if (read_version < 0) return out;
  auto range = [&](const std::string& from, const std::string& to) {
    pb::Compare& c = out.emplace_back();  // no record in the range modified after read_version
    c.set_key(from);
    c.set_range_end(to);
    c.set_target(pb::Compare::MOD);
    c.set_result(pb::Compare::LESS);
    c.set_mod_revision(read_version + 1);
  };
  auto pin = [&](const SeenRecords::value_type& record) {
    pb::Compare& c = out.emplace_back();
    c.set_key(record.first);
    c.set_target(pb::Compare::MOD);
    c.set_result(pb::Compare::EQUAL);
    c.set_mod_revision(record.second);
  };
  walk_compares(codec_, read_conflicts, seen, range, pin);
  return out;
}

std::size_t TxnBuilder::count_conflict_compares(Version read_version,
                                                const std::vector<KeyRange>& read_conflicts,
                                                const SeenRecords& seen) const {
  if (read_version < 0) return 0;
  std::size_t n = 0;
  walk_compares(
      codec_, read_conflicts, seen, [&](const std::string&, const std::string&) { ++n; },
      [&](const SeenRecords::value_type&) { ++n; });
  return n;
}

WriteOps TxnBuilder::write_ops(const Collapsed& collapsed,
                               std::optional<std::uint64_t> sequence) const {
  BuildSink sink;
  WriteWalk(codec_, collapsed, sink).run(/*with_deltas_ids=*/true);
  if (sequence) sink.put(codec_.sequencer_key(), common::encode_be64(*sequence));
  // etcd does not advance the revision for a Txn that changes nothing (e.g. only deletes of
  // absent keys), so two such commits would share a version. A put always advances it; a put
  // to this key outside every kvq range reads nothing and conflicts with nothing.
  if (!sink.out.ops.empty() && !sink.out.has_put) sink.put(codec_.commit_marker_key(), "");
  return std::move(sink.out);
}

std::size_t TxnBuilder::count_write_ops(const Collapsed& collapsed, bool with_sequence) const {
  CountSink sink;
  WriteWalk(codec_, collapsed, sink).run(/*with_deltas_ids=*/false);
  if (with_sequence) sink.put("", "");
  if (sink.ops > 0 && !sink.has_put) sink.put("", "");
  return sink.ops;
}

}  // namespace kvq::engine::etcd
