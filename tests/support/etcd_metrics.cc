#include "support/etcd_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <sstream>
#include <stdexcept>

namespace kvq::testing {
namespace {

// The body of `GET /metrics` from `endpoint` ("127.0.0.1:port"), over HTTP/1.0 (the server closes
// the connection after the answer). Throws std::runtime_error.
std::string fetch_metrics(const std::string& endpoint) {
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error("etcd_metrics: bad endpoint " + endpoint);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  if (inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    throw std::runtime_error("etcd_metrics: not an IPv4 address: " + endpoint);
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("etcd_metrics: socket() failed");
  timeval timeout{5, 0};  // a member that stopped answering fails the helper, not the test run
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  std::string answer;
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: " + endpoint + "\r\n\r\n";
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size());
  char buf[65536];
  for (ssize_t n = 0; ok && (n = read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) ok = false;
    if (n > 0) answer.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  const std::size_t body = answer.find("\r\n\r\n");
  if (!ok || answer.rfind("HTTP/1.", 0) != 0 || answer.find(" 200 ") > 12 ||
      body == std::string::npos) {
    throw std::runtime_error("etcd_metrics: GET /metrics from " + endpoint + " failed");
  }
  return answer.substr(body + 4);
}

}  // namespace

std::int64_t etcd_requests_handled(const std::string& endpoint,
                                   const std::vector<std::string_view>& methods) {
  const std::string metrics = fetch_metrics(endpoint);
  if (metrics.find("grpc_server_handled_total") == std::string::npos) {
    throw std::runtime_error("etcd_metrics: " + endpoint + " counts no gRPC requests");
  }
  std::istringstream lines(metrics);
  std::int64_t total = 0;
  for (std::string line; std::getline(lines, line);) {
    // grpc_server_handled_total{grpc_code="OK",grpc_method="Range",...} 42
    if (line.rfind("grpc_server_handled_total{", 0) != 0) continue;
    for (std::string_view method : methods) {
      if (line.find("grpc_method=\"" + std::string(method) + "\"") == std::string::npos) continue;
      total += static_cast<std::int64_t>(std::stod(line.substr(line.rfind(' ') + 1)));
    }
  }
  return total;
}

}  // namespace kvq::testing
