// Test helper: certificates for TLS tests, made with the openssl CLI in a temporary directory:
// a CA, a server certificate for 127.0.0.1 / localhost signed by it, a client certificate signed
// by it, and a second CA that signed nothing here (for "untrusted" tests).
//
// Example:
//   TempDir dir("pki");
//   TestPki pki = make_test_pki(dir.path());
//   EtcdCluster cluster(1, {}, EtcdClusterTls{pki.server_cert, pki.server_key, pki.ca});
#ifndef KVQ_TESTS_SUPPORT_TEST_PKI_H_
#define KVQ_TESTS_SUPPORT_TEST_PKI_H_

#include <string>

namespace kvq::testing {

// Paths of the PEM files make_test_pki wrote.
struct TestPki {
  std::string ca;           // the CA's certificate
  std::string server_cert;  // CN kvq-test-server, SAN IP:127.0.0.1 and DNS:localhost
  std::string server_key;
  std::string client_cert;  // CN kvq-test-client, extendedKeyUsage clientAuth
  std::string client_key;
  std::string other_ca;  // a CA unrelated to the certificates above
};

// True if /usr/bin/openssl exists.
bool openssl_available();

// Writes the files into the existing directory `dir` (EC P-256 keys, valid 2 days). Throws
// std::runtime_error if openssl is missing or fails (its messages are in dir/openssl.log).
TestPki make_test_pki(const std::string& dir);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_TEST_PKI_H_
