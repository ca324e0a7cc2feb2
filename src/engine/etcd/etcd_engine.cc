#include "engine/etcd/etcd_engine.h"

#include "engine/etcd/cluster.h"
#include "engine/etcd/compactor.h"
#include "engine/etcd/etcd_session.h"
#include "engine/etcd/watcher.h"
#include "kvq/error.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;

std::optional<MemberStatus> probe_member(const std::string& endpoint,
                                         std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
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
  if (!cluster_->any_endpoint_answers()) {
    std::string list;
    for (const std::string& ep : cluster_->options().endpoints) {
      list += (list.empty() ? "" : ",") + ep;
    }
    throw Error(ErrorCode::kConnectionFailed, "etcd: no endpoint of " + list + " answers");
  }
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

TransactionLimits EtcdEngine::limits() const { return transaction_limits(cluster_->options()); }

std::shared_ptr<Engine> open_etcd(std::string_view url) {
  return std::make_shared<EtcdEngine>(parse_etcd_url(url));
}

}  // namespace kvq::engine::etcd

namespace kvq::engine {

std::shared_ptr<Engine> open_etcd(const std::string& body,
                                  const std::map<std::string, std::string>& query) {
  // kvq::open passes the endpoints with or without the URL's leading "//".
  std::string url = body.rfind("//", 0) == 0 ? "etcd:" + body : "etcd://" + body;
  char sep = '?';
  for (const auto& [key, value] : query) {
    url += sep + key + "=" + value;
    sep = '&';
  }
  return etcd::open_etcd(url);
}

}  // namespace kvq::engine
