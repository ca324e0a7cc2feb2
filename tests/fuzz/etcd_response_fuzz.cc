// libFuzzer target: the decoding of etcd's answers, as a misbehaving or corrupted server could send
// them. The first byte picks what the rest is (and a stamped commit, a key prefix); the rest is
// parsed as that protobuf message and fed through the engine's own decoders:
//   0  RangeResponse  -> key_group.h (records to kvq keys and values), responses.h (revision,
//                        versionstamp sequencer)
//   1  TxnResponse    -> responses.h decode_commit_response (plain or stamped commit)
//   2  WatchResponse  -> responses.h decode_watch_response
//   3  a failed RPC   -> rpc_errors.h (gRPC code from the next byte, the rest its message)
// Whatever the input, the only way out is a value or a kvq::Error; a value must keep the decoders'
// promises (a key recovered from records encodes back to a base record of itself, an applied
// commit has a revision, a sequencer value is 8 bytes). Anything else is a finding.
// scripts/fuzz.sh runs it.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "engine/etcd/key_codec.h"
#include "engine/etcd/key_group.h"
#include "engine/etcd/responses.h"
#include "engine/etcd/rpc_errors.h"
#include "kvq/error.h"
#include "rpc.pb.h"

namespace {

namespace etcd = kvq::engine::etcd;
namespace pb = ::etcdserverpb;

// Runs `decode`; a kvq::Error is a clean refusal (other exceptions escape: a finding).
template <typename Decode>
void refuses_cleanly(Decode decode) {
  try {
    decode();
  } catch (const kvq::Error&) {
  }
}

void check_sequencer(const etcd::Sequencer& s) {
  if (s.floor < 0 || (s.value && (s.value->size() != 8 || s.mod <= 0))) std::abort();
}

void range_response(std::string_view bytes, const etcd::KeyCodec& codec) {
  pb::RangeResponse response;
  if (!response.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  refuses_cleanly([&] {
    if (etcd::response_revision(response.header(), "fuzz") <= 0) std::abort();
  });
  for (const etcd::KeyGroup& g : etcd::group_records(codec, response.kvs())) {
    const std::optional<etcd::DecodedKey> back = codec.decode(codec.encode(g.key));
    if (!back || back->key != g.key || back->delta) std::abort();
    (void)g.value();
  }
  refuses_cleanly([&] { check_sequencer(etcd::decode_sequencer(response)); });
}

void txn_response(std::string_view bytes, bool stamped) {
  pb::TxnResponse response;
  if (!response.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  refuses_cleanly([&] {
    const etcd::CommitAnswer a = etcd::decode_commit_response(response, stamped);
    if (a.kind == etcd::CommitAnswer::kApplied && a.revision <= 0) std::abort();
    if ((a.kind == etcd::CommitAnswer::kSequencerMoved) != a.sequencer.has_value()) std::abort();
    if (a.sequencer) check_sequencer(*a.sequencer);
  });
}

void watch_response(std::string_view bytes) {
  pb::WatchResponse response;
  if (!response.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  refuses_cleanly([&] { (void)etcd::decode_watch_response(response); });
}

void failed_rpc(std::string_view bytes, bool commit) {
  if (bytes.empty()) return;
  const auto code = static_cast<grpc::StatusCode>(static_cast<unsigned char>(bytes[0]) % 17);
  const grpc::Status status(code, std::string(bytes.substr(1)));
  (void)etcd::is_transport_error(status);
  (void)etcd::never_sent(status);
  (void)etcd::token_refused(status);
  (void)etcd::auth_not_enabled(status);
  try {
    etcd::throw_rpc_error(status, "fuzz", commit);
  } catch (const kvq::Error&) {
    return;
  }
  std::abort();  // throw_rpc_error returned
}

}  // namespace

// Silences protobuf's log of rejected input (invalid UTF-8 in string fields): noise, not findings.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t pick = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool flag = (pick & 4) != 0;  // a stamped commit; a commit's RPC failed
  static const etcd::KeyCodec prefixed("app/");
  static const etcd::KeyCodec bare("");
  switch (pick & 3) {
    case 0:
      range_response(rest, (pick & 8) != 0 ? bare : prefixed);
      break;
    case 1:
      txn_response(rest, flag);
      break;
    case 2:
      watch_response(rest);
      break;
    default:
      failed_rpc(rest, flag);
      break;
  }
  return 0;
}
