#include "engine/etcd/cluster.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;

void set_deadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

Cluster::Cluster(EtcdOptions options)
    : options_(std::move(options)), codec_(options_.prefix), auth_(options_.security) {
  const std::shared_ptr<grpc::ChannelCredentials> credentials =
      channel_credentials(options_.security);
  for (const std::string& address : options_.endpoints) {
    endpoints_.push_back(std::make_unique<Endpoint>(address, credentials));
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

grpc::Status Cluster::read_txn(const pb::TxnRequest& request, pb::TxnResponse* response) {
  return read_rpc([&](const Stubs& stubs, grpc::ClientContext& ctx) {
    response->Clear();
    return stubs.kv->Txn(&ctx, request, response);
  });
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

grpc::Status Cluster::probe_space() {
  pb::TxnRequest probe;
  pb::Compare* never = probe.add_compare();
  never->set_key(codec_.commit_marker_key());
  never->set_target(pb::Compare::VERSION);
  never->set_result(pb::Compare::LESS);
  never->set_version(0);
  probe.add_success()->mutable_request_put()->set_key(codec_.commit_marker_key());
  pb::TxnResponse response;
  grpc::Status s = txn_once(probe, &response);
  return out_of_space(s) ? s : grpc::Status::OK;
}

pb::TxnResponse Cluster::commit_rpc(const pb::TxnRequest& request) {
  if (out_of_space_.load(std::memory_order_relaxed)) {
    if (grpc::Status s = probe_space(); !s.ok()) throw_rpc_error(s, "commit", /*commit=*/false);
    out_of_space_.store(false, std::memory_order_relaxed);
  }
  const auto start = Clock::now();
  for (int attempt = 1;; ++attempt) {
    const std::size_t i = commit_endpoint();
    std::shared_ptr<const Stubs> stubs = endpoints_[i]->stubs();
    pb::TxnResponse response;
    grpc::Status s = authed(*stubs, [&](grpc::ClientContext& ctx) {
      response.Clear();
      return stubs->kv->Txn(&ctx, request, &response);
    });
    endpoints_[i]->note(stubs, s);
    if (s.ok()) return response;
    if (out_of_space(s)) out_of_space_.store(true, std::memory_order_relaxed);
    if (is_transport_error(s)) move_on(i);
    // Every earlier attempt was never sent too (any other failure ended the loop): if this one
    // was not either, the commit never left the client, and that is not an unknown result.
    if (!never_sent(s) || Clock::now() - start >= options_.failover_budget) {
      throw_rpc_error(s, "commit", /*commit=*/!never_sent(s));
    }
    back_off(attempt);
  }
}

grpc::Status Cluster::txn_once(const pb::TxnRequest& request, pb::TxnResponse* response) {
  Endpoint& ep = *endpoints_[preferred()];
  std::shared_ptr<const Stubs> stubs = ep.stubs();
  grpc::Status s = authed(*stubs, [&](grpc::ClientContext& ctx) {
    response->Clear();
    return stubs->kv->Txn(&ctx, request, response);
  });
  ep.note(stubs, s);
  return s;
}

grpc::Status Cluster::compact_once(std::int64_t revision) {
  Endpoint& ep = *endpoints_[preferred()];
  std::shared_ptr<const Stubs> stubs = ep.stubs();
  pb::CompactionRequest request;
  request.set_revision(revision);
  pb::CompactionResponse response;
  grpc::Status s = authed(*stubs, [&](grpc::ClientContext& ctx) {
    return stubs->kv->Compact(&ctx, request, &response);
  });
  ep.note(stubs, s);
  return s;
}

grpc::Status Cluster::probe_endpoints() {
  // Named steps: two rounds that wait for each channel to connect (a short and a full RPC
  // timeout), then one that fails fast so its status says why nothing answered.
  grpc::Status last;
  for (int round = 0; round < 3; ++round) {
    for (const std::unique_ptr<Endpoint>& ep : endpoints_) {
      std::shared_ptr<const Stubs> stubs = ep->stubs();
      grpc::ClientContext ctx;
      set_deadline(ctx, round == 0 ? std::min(options_.rpc_timeout, std::chrono::milliseconds(500))
                                   : options_.rpc_timeout);
      ctx.set_wait_for_ready(round < 2);
      auth_.attach(ctx);
      pb::StatusRequest request;
      pb::StatusResponse response;
      last = stubs->maintenance->Status(&ctx, request, &response);
      if (last.ok()) return last;
    }
  }
  return last;
}

void Cluster::authenticate() {
  if (!auth_.enabled()) return;
  grpc::Status last;
  for (std::size_t n = 0, i = preferred(); n < endpoints_.size(); ++n, i = next(i)) {
    std::shared_ptr<const Stubs> stubs = endpoints_[i]->stubs();
    last = auth_.renew(*stubs, auth_.generation(), options_.rpc_timeout);
    if (last.ok()) return;
    if (!is_transport_error(last)) break;
  }
  throw_rpc_error(last, "authenticate as '" + auth_.user() + "'", /*commit=*/false);
}

void Cluster::saw(std::int64_t revision) {
  std::int64_t cur = latest_seen_.load(std::memory_order_relaxed);
  while (cur < revision && !latest_seen_.compare_exchange_weak(cur, revision)) {
  }
}

std::unique_ptr<Cluster::FoldingMark> Cluster::start_folding(const std::string& key) {
  std::lock_guard lock(folding_mu_);
  if (!folding_.insert(key).second) return nullptr;
  return std::make_unique<FoldingMark>(*this, key);
}

Cluster::FoldingMark::~FoldingMark() {
  std::lock_guard lock(cluster_.folding_mu_);
  cluster_.folding_.erase(key_);
}

}  // namespace kvq::engine::etcd
