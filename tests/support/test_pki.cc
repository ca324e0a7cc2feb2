#include "support/test_pki.h"

#include <unistd.h>

#include <stdexcept>
#include <vector>

#include "support/subprocess.h"

namespace kvq::testing {
namespace {

constexpr const char* kOpenssl = "/usr/bin/openssl";

// The shell commands making a CA named `name` (name.pem, name.key).
std::string make_ca(const std::string& name) {
  return std::string(kOpenssl) +
         " req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
         " -keyout " +
         name + ".key -out " + name + ".pem -subj /CN=kvq-test-" + name + "\n";
}

// The shell commands making `name`.pem / `name`.key signed by ca.pem with extensions `ext`.
std::string make_leaf(const std::string& name, const std::string& ext) {
  const std::string o = kOpenssl;
  return o + " req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name +
         ".key -out " + name + ".csr -subj /CN=kvq-test-" + name + "\n" + "printf '" + ext +
         "' > " + name + ".ext\n" + o + " x509 -req -in " + name +
         ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out " + name + ".pem -extfile " +
         name + ".ext\n";
}

}  // namespace

bool openssl_available() { return access(kOpenssl, X_OK) == 0; }

TestPki make_test_pki(const std::string& dir) {
  if (!openssl_available()) throw std::runtime_error("test_pki: no " + std::string(kOpenssl));
  const std::string script =
      "set -e\ncd '" + dir + "'\nexec 2>>openssl.log\n" + make_ca("ca") + make_ca("other_ca") +
      make_leaf("server",
                "subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n") +
      make_leaf("client", "extendedKeyUsage=clientAuth\\n");
  std::string output;
  if (run_program({"/bin/sh", "-c", script}, &output) != 0) {
    throw std::runtime_error("test_pki: openssl failed; see " + dir + "/openssl.log");
  }
  TestPki pki;
  pki.ca = dir + "/ca.pem";
  pki.server_cert = dir + "/server.pem";
  pki.server_key = dir + "/server.key";
  pki.client_cert = dir + "/client.pem";
  pki.client_key = dir + "/client.key";
  pki.other_ca = dir + "/other_ca.pem";
  return pki;
}

}  // namespace kvq::testing
