#include "engine/etcd/endpoint.h"

#include "engine/etcd/rpc_errors.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const EtcdSecurity& security) {
  if (!security.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = security.ca_pem;  // empty: gRPC's default roots
  ssl.pem_private_key = security.key_pem;
  ssl.pem_cert_chain = security.cert_pem;
  return grpc::SslCredentials(ssl);
}

Endpoint::Endpoint(std::string address, std::shared_ptr<grpc::ChannelCredentials> credentials)
    : address_(std::move(address)), credentials_(std::move(credentials)), current_(connect()) {}

std::shared_ptr<const Stubs> Endpoint::connect() const {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // In gRPC 1.51 this is the minimum connect timeout (not a back-off): small values get
  // channels stuck after a server restart (see the file comment).
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  // A replacement channel must not inherit the stuck one's subchannel from the global pool.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // While a call is open (a watch stream can be for hours), ping the member every 10 s and drop
  // the connection if a ping goes unanswered for 5 s: a frozen member (SIGSTOP, a paused VM) then
  // ends the stream instead of holding it forever. etcd accepts pings every 5 s or more
  // (--grpc-keepalive-min-time); gRPC would stop after 2 pings without data, so no limit.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto out = std::make_shared<Stubs>();
  // The target names its resolver: a bare "unix:1" or "dns:1" would be read as a scheme, not as
  // host "unix" or "dns" and port 1 (the URL parser checked that the address is host:port).
  out->channel = grpc::CreateCustomChannel("dns:///" + address_, credentials_, args);
  out->kv = pb::KV::NewStub(out->channel);
  out->watch = pb::Watch::NewStub(out->channel);
  out->maintenance = pb::Maintenance::NewStub(out->channel);
  out->auth = pb::Auth::NewStub(out->channel);
  return out;
}

std::shared_ptr<const Stubs> Endpoint::stubs() const {
  std::lock_guard lock(mu_);
  return current_;
}

void Endpoint::note(const std::shared_ptr<const Stubs>& used, const grpc::Status& status) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  if (used != current_) return;
  if (!is_transport_error(status)) {
    failures_ = 0;
    return;
  }
  if (failures_++ == 0) first_failure_ = now;
  if (failures_ >= kStuckFailures && now - first_failure_ >= kStuckAfter) {
    current_ = connect();
    ++channels_made_;
    failures_ = 0;
  }
}

bool Endpoint::known_down() const {
  return stubs()->channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE;
}

std::uint64_t Endpoint::channels_made() const {
  std::lock_guard lock(mu_);
  return channels_made_;
}

}  // namespace kvq::engine::etcd
