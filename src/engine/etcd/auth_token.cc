#include "engine/etcd/auth_token.h"

#include "engine/etcd/rpc_errors.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;

AuthToken::AuthToken(const EtcdSecurity& security)
    : user_(security.user), password_(security.password) {}

std::uint64_t AuthToken::attach(grpc::ClientContext& ctx) const {
  std::lock_guard lock(mu_);
  if (!token_.empty()) ctx.AddMetadata("token", token_);
  return generation_;
}

std::uint64_t AuthToken::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

grpc::Status AuthToken::renew(const Stubs& stubs, std::uint64_t used,
                              std::chrono::milliseconds timeout) {
  if (!enabled()) return grpc::Status::OK;  // nothing to renew: the caller reports the refusal
  std::lock_guard renewing(renew_mu_);
  {
    std::lock_guard lock(mu_);
    if (generation_ != used) return grpc::Status::OK;  // renewed by another call meanwhile
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  pb::AuthenticateRequest request;
  request.set_name(user_);
  request.set_password(password_);
  pb::AuthenticateResponse response;
  grpc::Status s = stubs.auth->Authenticate(&ctx, request, &response);
  const bool auth_off = !s.ok() && auth_not_enabled(s);
  if (!s.ok() && !auth_off) return s;
  std::lock_guard lock(mu_);
  token_ = auth_off ? "" : response.token();
  ++generation_;
  if (!auth_off) ++authentications_;
  return grpc::Status::OK;
}

std::uint64_t AuthToken::authentications() const {
  std::lock_guard lock(mu_);
  return authentications_;
}

}  // namespace kvq::engine::etcd
