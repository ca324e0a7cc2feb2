#include "engine/etcd/responses.h"

#include "kvq/error.h"

namespace kvq::engine::etcd {
namespace {

namespace pb = ::etcdserverpb;

[[noreturn]] void malformed_commit(const std::string& what) {
  throw Error(ErrorCode::kCommitUnknownResult,
              "etcd commit: malformed Txn response (" + what +
                  "); the commit may or may not have been applied");
}

// The inner Txn's response of a stamped commit whose outer Txn succeeded.
const pb::TxnResponse& inner_response(const pb::TxnResponse& response) {
  if (response.responses_size() < 1 || !response.responses(0).has_response_txn()) {
    malformed_commit("no response of the inner Txn");
  }
  return response.responses(0).response_txn();
}

// The sequencer read by a failed inner Txn.
Sequencer moved_sequencer(const pb::TxnResponse& inner) {
  if (inner.responses_size() < 1 || !inner.responses(0).has_response_range()) {
    malformed_commit("the inner Txn failed without reading the sequencer");
  }
  return decode_sequencer(inner.responses(0).response_range());
}

}  // namespace

std::int64_t response_revision(const pb::ResponseHeader& header, std::string_view what) {
  if (header.revision() <= 0) {
    throw Error(ErrorCode::kUnknownError, "etcd " + std::string(what) +
                                              ": response without a revision (" +
                                              std::to_string(header.revision()) + ")");
  }
  return header.revision();
}

Sequencer decode_sequencer(const pb::RangeResponse& response) {
  Sequencer s;
  // A nested Range may come without a header revision: 0 is a floor that holds no stamp back.
  if (response.header().revision() < 0) {
    throw Error(ErrorCode::kUnknownError, "etcd versionstamp: response with a negative revision");
  }
  s.floor = response.header().revision();
  if (response.kvs_size() == 0) return s;
  const mvccpb::KeyValue& kv = response.kvs(0);
  if (kv.mod_revision() <= 0) {
    throw Error(ErrorCode::kUnknownError, "etcd versionstamp: sequencer record without revision");
  }
  if (kv.value().size() != kSequenceSize) {
    throw Error(ErrorCode::kCorruption, "etcd versionstamp: the sequencer holds " +
                                            std::to_string(kv.value().size()) +
                                            " bytes, not the 8 kvq writes");
  }
  s.value = kv.value();
  s.mod = kv.mod_revision();
  return s;
}

CommitAnswer decode_commit_response(const pb::TxnResponse& response, bool stamped) {
  CommitAnswer a;
  if (!response.succeeded()) return a;  // kConflict
  if (stamped) {
    const pb::TxnResponse& inner = inner_response(response);
    if (!inner.succeeded()) {
      a.kind = CommitAnswer::kSequencerMoved;
      a.sequencer = moved_sequencer(inner);
      return a;
    }
  }
  if (response.header().revision() <= 0) malformed_commit("no revision");
  a.kind = CommitAnswer::kApplied;
  a.revision = response.header().revision();
  return a;
}

WatchNews decode_watch_response(const pb::WatchResponse& response) {
  if (response.canceled()) {
    if (response.cancel_reason().find("permission denied") != std::string::npos) {
      throw Error(
          ErrorCode::kPermissionDenied,
          "etcd watch: the etcd user may not read this key (" + response.cancel_reason() + ")");
    }
    if (response.compact_revision() <= 0) {
      throw Error(ErrorCode::kConnectionFailed,
                  "etcd watch: cancelled by server: " + response.cancel_reason());
    }
    return WatchNews::kCompacted;
  }
  return response.events_size() > 0 ? WatchNews::kEvents : WatchNews::kNothing;
}

}  // namespace kvq::engine::etcd
