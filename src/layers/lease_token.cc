#include "layers/lease_token.h"

#include <array>

#include "common/bytes.h"
#include "kvq/error.h"
#include "kvq/lease.h"

namespace kvq {
namespace detail {
namespace {

constexpr char kFormat = 'L';
constexpr std::size_t kTagSize = 8;
constexpr std::size_t kTokenSize = 1 + kTagSize + kTakeIdSize;

[[noreturn]] void bad_token(const char* why) {
  throw Error(ErrorCode::kInvalidLeaseToken, std::string("lease token: ") + why);
}

int sextet(char c) {
  const auto pos = common::base64_digits(common::Base64::kUrl).find(c);
  if (pos == std::string_view::npos) bad_token("not base64url text");
  return static_cast<int>(pos);
}

std::string from_base64url(std::string_view text) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    acc = (acc << 6) | static_cast<std::uint32_t>(sextet(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6 || (acc & ((1u << bits) - 1)) != 0) bad_token("not base64url text");
  return out;
}

}  // namespace

std::string queue_tag(const Subspace& subspace, bool prioritized) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits
  for (unsigned char c : subspace.key() + (prioritized ? "P" : "Q")) {
    h = (h ^ c) * 0x100000001b3ULL;
  }
  return common::encode_be64(h);
}

std::string make_token(std::string_view tag, std::string_view id) {
  std::string token(1, kFormat);
  token += tag;
  token += id;
  return token;
}

std::string token_take_id(std::string_view token, std::string_view tag) {
  if (token.size() != kTokenSize || token[0] != kFormat) bad_token("malformed token");
  if (token.substr(1, kTagSize) != tag) {
    bad_token("the token is of another queue (or, in a fair queue, of another tenant)");
  }
  return std::string(token.substr(1 + kTagSize));
}

}  // namespace detail

std::string Lease::token_text() const { return common::base64(token, common::Base64::kUrl); }

Lease Lease::from_text(std::string_view text) {
  Lease lease;
  lease.token = detail::from_base64url(text);
  if (lease.token.size() != detail::kTokenSize || lease.token[0] != detail::kFormat) {
    detail::bad_token("malformed token");
  }
  return lease;
}

}  // namespace kvq
