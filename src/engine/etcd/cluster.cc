#include "engine/etcd/cluster.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;

void set_deadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

Cluster::Cluster(EtcdOptions options) : options_(std::move(options)), codec_(options_.prefix) {
  for (const std::string& address : options_.endpoints) {
    endpoints_.push_back(std::make_unique<Endpoint>(address));
  }
}

void Cluster::back_off(int attempt) const {
  if (attempt % static_cast<int>(endpoints_.size()) != 0) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50 * attempt, 500)));
}

pb::RangeResponse Cluster::range(pb::RangeRequest request, std::string_view what) {
  pb::RangeResponse response;
  auto call = [&](const Stubs& stubs, grpc::ClientContext& ctx) {
    response.Clear();
    return stubs.kv->Range(&ctx, request, &response);
  };
  grpc::Status s = read_rpc(call);
  if (!s.ok() && request.serializable() &&
      s.error_message().find("future revision") != std::string::npos) {
    request.set_serializable(false);
    s = read_rpc(call);
  }
  if (!s.ok()) throw_rpc_error(s, what, /*commit=*/false);
  return response;
}

std::size_t Cluster::commit_endpoint() {
  std::size_t i = preferred();
  if (endpoints_.size() == 1 || !endpoints_[i]->known_down()) return i;
  // Known to be down: prefer another member (the request has not been sent anywhere yet).
  for (std::size_t j = next(i); j != i; j = next(j)) {
    if (!endpoints_[j]->known_down()) {
      preferred_.compare_exchange_strong(i, j);
      return j;
    }
  }
  return i;
}

pb::TxnResponse Cluster::commit_rpc(const pb::TxnRequest& request) {
  const auto start = Clock::now();
  for (int attempt = 1;; ++attempt) {
    const std::size_t i = commit_endpoint();
    std::shared_ptr<const Stubs> stubs = endpoints_[i]->stubs();
    grpc::ClientContext ctx;
    set_deadline(ctx, options_.rpc_timeout);
    pb::TxnResponse response;
    grpc::Status s = stubs->kv->Txn(&ctx, request, &response);
    endpoints_[i]->note(stubs, s);
    if (s.ok()) return response;
    if (is_transport_error(s)) move_on(i);
    if (!never_sent(s) || Clock::now() - start >= options_.failover_budget) {
      throw_rpc_error(s, "commit", /*commit=*/true);
    }
    back_off(attempt);
  }
}

grpc::Status Cluster::txn_once(const pb::TxnRequest& request, pb::TxnResponse* response) {
  Endpoint& ep = *endpoints_[preferred()];
  std::shared_ptr<const Stubs> stubs = ep.stubs();
  grpc::ClientContext ctx;
  set_deadline(ctx, options_.rpc_timeout);
  grpc::Status s = stubs->kv->Txn(&ctx, request, response);
  ep.note(stubs, s);
  return s;
}

grpc::Status Cluster::compact_once(std::int64_t revision) {
  Endpoint& ep = *endpoints_[preferred()];
  std::shared_ptr<const Stubs> stubs = ep.stubs();
  pb::CompactionRequest request;
  request.set_revision(revision);
  pb::CompactionResponse response;
  grpc::ClientContext ctx;
  set_deadline(ctx, options_.rpc_timeout);
  grpc::Status s = stubs->kv->Compact(&ctx, request, &response);
  ep.note(stubs, s);
  return s;
}

bool Cluster::any_endpoint_answers() {
  for (int round = 0; round < 2; ++round) {
    for (const std::unique_ptr<Endpoint>& ep : endpoints_) {
      std::shared_ptr<const Stubs> stubs = ep->stubs();
      grpc::ClientContext ctx;
      set_deadline(ctx, round == 0 ? std::min(options_.rpc_timeout, std::chrono::milliseconds(500))
                                   : options_.rpc_timeout);
      ctx.set_wait_for_ready(true);
      pb::StatusRequest request;
      pb::StatusResponse response;
      if (stubs->maintenance->Status(&ctx, request, &response).ok()) return true;
    }
  }
  return false;
}

void Cluster::saw(std::int64_t revision) {
  std::int64_t cur = latest_seen_.load(std::memory_order_relaxed);
  while (cur < revision && !latest_seen_.compare_exchange_weak(cur, revision)) {
  }
}

}  // namespace kvq::engine::etcd
