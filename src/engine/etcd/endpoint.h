// Internal (etcd engine): the gRPC channel to one cluster member, replaced when it gets stuck.
//
// gRPC 1.51's channels can stay in TRANSIENT_FAILURE for good after the server restarts: measured
// against a SIGKILLed and restarted etcd, a channel with a 100 ms minimum connect timeout
// (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, which 1.51 uses as the minimum connect timeout) failed every
// RPC with "tcp handshaker shutdown" in 4 of 6 runs while a new channel connected at once (gRPC
// issues #33423, #33593 report the same). So the channel keeps gRPC's reconnect back-off short
// (100 ms, at most 1 s) with a sane 2 s connect timeout, and an endpoint whose RPCs keep failing
// with transport errors gets a new channel (its own subchannel pool, so nothing stale is reused).
//
// Example:
//   Endpoint ep("127.0.0.1:23790", channel_credentials(options.security));
//   std::shared_ptr<const Stubs> s = ep.stubs();
//   grpc::Status status = s->kv->Range(&ctx, request, &response);
//   ep.note(s, status);
#ifndef KVQ_SRC_ENGINE_ETCD_ENDPOINT_H_
#define KVQ_SRC_ENGINE_ETCD_ENDPOINT_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "engine/etcd/etcd_security.h"
#include "rpc.grpc.pb.h"

namespace kvq::engine::etcd {

// One channel to a member and the stubs of the etcd services kvq uses over it.
struct Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  std::unique_ptr<etcdserverpb::Auth::Stub> auth;
};

// The channel credentials `security` asks for: TLS with its roots (gRPC's default roots if it
// names none) and client certificate, or plain text.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const EtcdSecurity& security);

// One cluster member. Thread-safe.
class Endpoint {
 public:
  // A channel is replaced after this many transport failures in a row...
  static constexpr int kStuckFailures = 3;
  // ...the first at least this long ago (so a member that is just restarting is not churned).
  static constexpr std::chrono::milliseconds kStuckAfter{1000};

  // Channels to `address` ("host:port") use `credentials` (channel_credentials()).
  Endpoint(std::string address, std::shared_ptr<grpc::ChannelCredentials> credentials);

  const std::string& address() const { return address_; }
  // The current channel and stubs (kept alive by the caller while it uses them).
  std::shared_ptr<const Stubs> stubs() const;
  // Records the outcome of an RPC made with `used`: success resets the failure count; a
  // transport error (UNAVAILABLE, DEADLINE_EXCEEDED) counts, and the channel is replaced once
  // the failures make it look stuck. Outcomes on an already replaced channel are ignored.
  void note(const std::shared_ptr<const Stubs>& used, const grpc::Status& status);
  // True if the current channel is in TRANSIENT_FAILURE (known down; does not try to connect).
  bool known_down() const;
  // How many channels this endpoint has made (1 + replacements); for tests and diagnostics.
  std::uint64_t channels_made() const;

 private:
  std::shared_ptr<const Stubs> connect() const;

  const std::string address_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  mutable std::mutex mu_;
  std::shared_ptr<const Stubs> current_;
  int failures_ = 0;
  std::chrono::steady_clock::time_point first_failure_;
  std::uint64_t channels_made_ = 1;
};

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_ENDPOINT_H_
