#include "engine/etcd/etcd_security.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/url.h"

namespace kvq::engine::etcd {

std::string SecurityParser::decode(std::string_view text, std::string_view what) const {
  std::optional<std::string> decoded = detail::percent_decode(text);
  // The text may be a password: the message names what it is, never the text.
  if (!decoded) throw bad_("malformed percent-encoding in the " + std::string(what));
  return *decoded;
}

void SecurityParser::userinfo(std::string_view encoded) {
  const std::size_t colon = encoded.find(':');
  security_.user = decode(encoded.substr(0, colon), "user name");
  if (security_.user.empty()) throw bad_("empty user name before '@'");
  if (colon == std::string_view::npos) return;
  security_.password = decode(encoded.substr(colon + 1), "password");
  password_in_url_ = true;
}

bool SecurityParser::option(std::string_view name, std::string_view value) {
  if (name == "plaintext_auth") {
    if (value != "0" && value != "1") throw bad_("plaintext_auth must be 0 or 1");
    security_.plaintext_auth = value == "1";
    return true;
  }
  std::string* target = nullptr;
  if (name == "ca_file") target = &security_.ca_file;
  if (name == "cert_file") target = &security_.cert_file;
  if (name == "key_file") target = &security_.key_file;
  if (name == "password_file") target = &password_file_;
  if (name == "user") {
    if (!security_.user.empty()) throw bad_("user given both before '@' and as user=");
    target = &security_.user;
  }
  if (target == nullptr) return false;
  *target = decode(value, name);
  if (target->empty()) throw bad_("option " + std::string(name) + " must not be empty");
  return true;
}

std::string SecurityParser::read_file(const std::string& path, std::string_view what) const {
  std::error_code ec;
  std::ifstream in;
  if (std::filesystem::is_regular_file(path, ec)) in.open(path, std::ios::binary);
  if (!in.is_open()) throw bad_(std::string(what) + " '" + path + "' cannot be read");
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw bad_(std::string(what) + " '" + path + "' cannot be read");
  if (contents.str().empty()) throw bad_(std::string(what) + " '" + path + "' is empty");
  return contents.str();
}

std::string SecurityParser::read_pem(const std::string& path, std::string_view what) const {
  std::string pem = read_file(path, what);
  if (pem.find("-----BEGIN ") == std::string::npos) {
    throw bad_(std::string(what) + " '" + path + "' is not PEM (no '-----BEGIN ' line)");
  }
  return pem;
}

void SecurityParser::check_combination() const {
  const EtcdSecurity& s = security_;
  if (!s.tls && !(s.ca_file.empty() && s.cert_file.empty() && s.key_file.empty())) {
    throw bad_("ca_file, cert_file and key_file need TLS: use etcds://");
  }
  if (s.cert_file.empty() != s.key_file.empty()) {
    throw bad_("cert_file and key_file go together (a client certificate and its key)");
  }
  if (password_in_url_ && !password_file_.empty()) {
    throw bad_("password given both in the URL and as password_file=");
  }
  if (s.user.empty() && (password_in_url_ || !password_file_.empty())) {
    throw bad_("a password needs a user (user:password@host or user=)");
  }
  if (!s.user.empty() && !password_in_url_ && password_file_.empty()) {
    throw bad_("user '" + s.user + "' has no password (user:password@host or password_file=)");
  }
  if (!s.tls && !s.user.empty() && !s.plaintext_auth) {
    throw bad_(
        "etcd:// would send the password in clear text: use etcds:// (or add plaintext_auth=1 "
        "on a trusted network)");
  }
}

EtcdSecurity SecurityParser::finish() {
  check_combination();
  // Named steps: the trust root, the client certificate, the password.
  if (!security_.ca_file.empty()) security_.ca_pem = read_pem(security_.ca_file, "ca_file");
  if (!security_.cert_file.empty()) {
    security_.cert_pem = read_pem(security_.cert_file, "cert_file");
    security_.key_pem = read_pem(security_.key_file, "key_file");
  }
  if (!password_file_.empty()) {
    std::string password = read_file(password_file_, "password_file");
    // One trailing line end (as `echo pw > file` leaves) is not part of the password.
    if (!password.empty() && password.back() == '\n') password.pop_back();
    if (!password.empty() && password.back() == '\r') password.pop_back();
    if (password.empty()) throw bad_("password_file '" + password_file_ + "' is empty");
    security_.password = std::move(password);
  }
  return security_;
}

}  // namespace kvq::engine::etcd
