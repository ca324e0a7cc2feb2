// Internal (etcd engine): TLS and user/password authentication of an etcd[s]:// URL, parsed and
// loaded before anything connects.
//
//   etcds://root:pw@10.0.0.1:2379?ca_file=/etc/kvq/ca.pem&cert_file=c.pem&key_file=c.key
//   etcds://10.0.0.1:2379?user=root&password_file=/run/secrets/etcd
//
// The password is never put in an error message (URLs in messages go through redact_url).
//
// Example:
//   SecurityParser p(/*tls=*/true, bad);       // bad(why) builds the URL's error
//   p.userinfo("root:p%40ss");                  // from "root:p%40ss@host:port"
//   p.option("ca_file", "/etc/kvq/ca.pem");     // true: a security option
//   EtcdSecurity s = p.finish();                // checks combinations, reads the files
#ifndef KVQ_SRC_ENGINE_ETCD_ETCD_SECURITY_H_
#define KVQ_SRC_ENGINE_ETCD_ETCD_SECURITY_H_

#include <functional>
#include <string>
#include <string_view>

#include "kvq/error.h"

namespace kvq::engine::etcd {

// How the engine checks the cluster and proves who it is.
struct EtcdSecurity {
  // etcds://: talk TLS and check the server's certificate.
  bool tls = false;
  // ca_file= as given, and its PEM contents: the roots trusted for the server's certificate.
  // Empty: gRPC's default roots (the system's).
  std::string ca_file;
  std::string ca_pem;
  // cert_file= / key_file= as given, and their PEM contents: the client certificate presented to
  // a server started with --client-cert-auth. Both or neither.
  std::string cert_file;
  std::string cert_pem;
  std::string key_file;
  std::string key_pem;
  // The etcd user (URL user information or user=, percent-decoded); empty: no authentication.
  std::string user;
  // The user's password (URL or password_file=). Never printed.
  std::string password;
  // plaintext_auth=1: allows a password over etcd:// (sent in clear text).
  bool plaintext_auth = false;

  // True if a user and password are to be sent (Auth.Authenticate).
  bool authenticates() const { return !user.empty(); }
};

// Collects the security parts of one URL, then checks them and reads the files. Every error is
// connection_string_invalid, built by the `bad` given (which adds the URL, redacted).
class SecurityParser {
 public:
  using Bad = std::function<Error(const std::string& why)>;

  // `tls`: the scheme is etcds://.
  SecurityParser(bool tls, Bad bad) : bad_(std::move(bad)) { security_.tls = tls; }

  // The URL's user information ("user" or "user:password", percent-encoded).
  void userinfo(std::string_view encoded);
  // Applies option `name`=`value` if it is a security option (ca_file, cert_file, key_file,
  // user, password_file, plaintext_auth); false if it is not one. Values are percent-decoded.
  bool option(std::string_view name, std::string_view value);
  // Checks the combination (cert_file and key_file both or neither; files only with etcds://;
  // a password needs a user and a user a password, from one place each; a password over etcd://
  // only with plaintext_auth=1) and reads the files (unreadable, empty or not PEM: an error).
  EtcdSecurity finish();

 private:
  std::string decode(std::string_view text, std::string_view what) const;
  // The contents of `path` (option `what`); throws if it cannot be read or is empty.
  std::string read_file(const std::string& path, std::string_view what) const;
  std::string read_pem(const std::string& path, std::string_view what) const;
  void check_combination() const;

  Bad bad_;
  EtcdSecurity security_;
  std::string password_file_;
  bool password_in_url_ = false;
};

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_ETCD_SECURITY_H_
