#include "engine/etcd/etcd_engine.h"

#include "engine/etcd/cluster.h"
#include "engine/etcd/compactor.h"
#include "engine/etcd/etcd_session.h"
#include "engine/etcd/watcher.h"
#include "kvq/error.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;

namespace {

bool mentions_tls(const std::string& message) {
  for (const char* word : {"andshake", "SSL", "ssl", "ertificate", "CERTIFICATE", "TLS"}) {
    if (message.find(word) != std::string::npos) return true;
  }
  return false;
}

// The connection_failed error of an engine none of whose endpoints answered with `last`: what
// gRPC said and, when it points at TLS, what to check.
Error no_endpoint_answers(const EtcdOptions& options, const grpc::Status& last) {
  std::string list;
  for (const std::string& ep : options.endpoints) list += (list.empty() ? "" : ",") + ep;
  std::string hint;
  const EtcdSecurity& security = options.security;
  if (security.tls && mentions_tls(last.error_message())) {
    hint = "; TLS handshake failed: the server's certificate is not signed by " +
           (security.ca_file.empty() ? std::string("a root the system trusts (give ca_file=)")
                                     : "ca_file=" + security.ca_file) +
           " or does not name the host, the server wants a client certificate (cert_file=, "
           "key_file=), or it does not speak TLS (then use etcd://)";
  } else if (security.tls) {
    hint =
        "; if the server does not speak TLS, use etcd://; if it wants a client certificate, "
        "give cert_file= and key_file=";
  } else if (last.error_message().find("Socket closed") != std::string::npos ||
             last.error_message().find("http1") != std::string::npos) {
    hint = "; if the server speaks TLS, use etcds://";
  }
  return Error(ErrorCode::kConnectionFailed,
               "etcd: no endpoint of " + list + " answers (" + describe(last) + ")" + hint);
}

}  // namespace

std::optional<MemberStatus> probe_member(const std::string& endpoint,
                                         std::chrono::milliseconds timeout,
                                         const EtcdSecurity& security) {
  auto channel = grpc::CreateChannel(endpoint, channel_credentials(security));
  auto stub = pb::Maintenance::NewStub(channel);
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout);
  pb::StatusRequest request;
  pb::StatusResponse response;
  if (!stub->Status(&ctx, request, &response).ok()) return std::nullopt;
  MemberStatus status;
  status.member_id = response.header().member_id();
  status.leader_id = response.leader();
  status.revision = response.header().revision();
  return status;
}

EtcdEngine::EtcdEngine(EtcdOptions options) {
  if (options.endpoints.empty()) {
    throw Error(ErrorCode::kConnectionStringInvalid, "etcd: no endpoint given");
  }
  if (options.prefix.empty()) {
    throw Error(ErrorCode::kConnectionStringInvalid, "etcd: key prefix must not be empty");
  }
  cluster_ = std::make_shared<Cluster>(std::move(options));
  // Named steps: reach a member (over TLS for etcds://), then get the auth token.
  if (grpc::Status s = cluster_->probe_endpoints(); !s.ok()) {
    throw no_endpoint_answers(cluster_->options(), s);
  }
  cluster_->authenticate();
  watcher_ = std::make_unique<Watcher>(cluster_);
  compactor_ = std::make_unique<Compactor>(cluster_);
  compactor_->start();
}

EtcdEngine::~EtcdEngine() {
  if (watcher_) watcher_->stop();
  if (compactor_) compactor_->stop();
}

std::unique_ptr<Session> EtcdEngine::begin() { return std::make_unique<EtcdSession>(cluster_); }

void EtcdEngine::watch(std::string key, std::optional<std::string> value_seen, Version version,
                       std::shared_ptr<detail::WatchState> state) {
  watcher_->start(std::move(key), std::move(value_seen), version, std::move(state));
}

std::uint64_t EtcdEngine::commit_batches() const { return cluster_->batches(); }

const EtcdOptions& EtcdEngine::options() const { return cluster_->options(); }

std::uint64_t EtcdEngine::channels_made(std::size_t i) const {
  return cluster_->endpoint(i).channels_made();
}

std::uint64_t EtcdEngine::authentications() const { return cluster_->auth().authentications(); }

TransactionLimits EtcdEngine::limits() const { return transaction_limits(cluster_->options()); }

std::shared_ptr<Engine> open_etcd(std::string_view url) {
  return std::make_shared<EtcdEngine>(parse_etcd_url(url));
}

}  // namespace kvq::engine::etcd

namespace kvq::engine {

std::shared_ptr<Engine> open_etcd(bool tls, const std::string& body,
                                  const std::map<std::string, std::string>& query) {
  // kvq::open passes the endpoints with or without the URL's leading "//".
  const std::string scheme = tls ? "etcds:" : "etcd:";
  std::string url = body.rfind("//", 0) == 0 ? scheme + body : scheme + "//" + body;
  char sep = '?';
  for (const auto& [key, value] : query) {
    url += sep + key + "=" + value;
    sep = '&';
  }
  return etcd::open_etcd(url);
}

}  // namespace kvq::engine
