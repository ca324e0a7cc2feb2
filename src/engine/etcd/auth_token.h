// Internal (etcd engine): the auth token of one engine. etcd's Auth.Authenticate trades a user
// and password for a token, which every later call carries as its "token" metadata (KV, Watch,
// Maintenance alike). Tokens die: simple tokens after --auth-token-ttl (default 300 s) without
// use, and all of them when the member restarts. A call refused for its token renews it once
// and is sent again (Cluster::authed); renewals are shared, so many calls refused together
// authenticate once.
//
// Example:
//   AuthToken auth(options.security);
//   grpc::ClientContext ctx;
//   std::uint64_t generation = auth.attach(ctx);
//   grpc::Status s = stubs.kv->Range(&ctx, request, &response);
//   if (token_refused(s)) s = auth.renew(stubs, generation, timeout);   // then send again
//   (token_refused: rpc_errors.h)
#ifndef KVQ_SRC_ENGINE_ETCD_AUTH_TOKEN_H_
#define KVQ_SRC_ENGINE_ETCD_AUTH_TOKEN_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "engine/etcd/endpoint.h"
#include "engine/etcd/etcd_security.h"

namespace kvq::engine::etcd {

// The token of one engine. Thread-safe.
class AuthToken {
 public:
  // Copies the user and password of `security` (no authentication if it has no user).
  explicit AuthToken(const EtcdSecurity& security);

  // True if the engine authenticates (a user was given).
  bool enabled() const { return !user_.empty(); }
  const std::string& user() const { return user_; }
  // Adds the current token (if any) to `ctx`; returns the token's generation for renew().
  std::uint64_t attach(grpc::ClientContext& ctx) const;
  // The current token's generation (0 before the first renewal).
  std::uint64_t generation() const;
  // Authenticates over `stubs` (one Authenticate call with deadline `timeout`) unless the token
  // of generation `used` was already replaced meanwhile. OK if there is a new token (or the
  // server has authentication off); else Authenticate's status, the password never in it.
  grpc::Status renew(const Stubs& stubs, std::uint64_t used, std::chrono::milliseconds timeout);
  // How many Authenticate calls succeeded; for tests.
  std::uint64_t authentications() const;

 private:
  const std::string user_;
  const std::string password_;
  std::mutex renew_mu_;  // one renewal at a time
  mutable std::mutex mu_;
  std::string token_;
  std::uint64_t generation_ = 0;
  std::uint64_t authentications_ = 0;
};

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_AUTH_TOKEN_H_
