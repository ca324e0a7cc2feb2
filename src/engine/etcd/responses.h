// Internal (etcd engine): what etcd's answers mean to kvq, as pure functions of the response
// messages (no server, no state), so that a malformed answer becomes one kvq::Error and never
// undefined behaviour. The engine decodes every Range, Txn and Watch response through these and
// key_group.h; tests/fuzz/etcd_response_fuzz.cc feeds them arbitrary messages.
//
// Example:
//   const CommitAnswer a = decode_commit_response(response, /*stamped=*/true);
//   if (a.kind == CommitAnswer::kSequencerMoved) retry_with(*a.sequencer);
#ifndef KVQ_SRC_ENGINE_ETCD_RESPONSES_H_
#define KVQ_SRC_ENGINE_ETCD_RESPONSES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rpc.pb.h"

namespace kvq::engine::etcd {

// The revision at which etcd served a response (its header's). etcd's revisions start at 1, so
// a header without one (<= 0) is malformed: throws unknown_error naming `what`.
std::int64_t response_revision(const etcdserverpb::ResponseHeader& header, std::string_view what);

// Bytes of the sequencer's value: the big-endian sequence (common::encode_be64), which is also
// the first 8 bytes of each stamp.
inline constexpr std::size_t kSequenceSize = 8;

// The versionstamp sequencer key as read: its value (absent = none; else the 8-byte big-endian
// sequence kvq wrote), mod revision, and the revision at which it was read (stamps are above it).
struct Sequencer {
  std::optional<std::string> value;
  std::int64_t mod = 0;
  std::int64_t floor = 0;
};

// The sequencer in a Range response on its key. Throws unknown_error (no revision, a record
// without a mod revision) or corruption (a value that is not 8 bytes).
Sequencer decode_sequencer(const etcdserverpb::RangeResponse& response);

// What the response to a commit Txn (committer.h) says.
struct CommitAnswer {
  enum Kind {
    kApplied,         // the writes were applied at `revision`
    kConflict,        // the compares failed: nothing applied
    kSequencerMoved,  // only the sequencer moved (stamped commits): nothing applied; `sequencer`
                      // holds its new state
  };
  Kind kind = kConflict;
  std::int64_t revision = 0;
  std::optional<Sequencer> sequencer;
};

// Decodes the response to a commit Txn, `stamped` if the writes were nested in an inner Txn
// pinning the sequencer. Throws commit_unknown_result for a malformed response on which the
// outer Txn succeeded (its writes may or may not be applied: no revision, no inner Txn response,
// no sequencer read) and corruption for a sequencer value that is not 8 bytes.
CommitAnswer decode_commit_response(const etcdserverpb::TxnResponse& response, bool stamped);

// What one Watch response on a key's records means for a kvq watch.
enum class WatchNews {
  kNothing,    // no event (the creation answer, a progress notice)
  kEvents,     // the records changed: the value may have
  kCompacted,  // the start revision was compacted away: compare the value instead
};

// Decodes one Watch response. Throws permission_denied (the user may not read the key) and
// connection_failed (any other cancellation by the server).
WatchNews decode_watch_response(const etcdserverpb::WatchResponse& response);

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_RESPONSES_H_
