// Subspace: a key prefix under which tuples are packed (FoundationDB's Subspace).
#include "kvq/subspace.h"

#include <cstdint>

namespace kvq {
namespace {

// A readable form of raw key bytes for error messages: printable ASCII as is, others as \xNN.
std::string Printable(std::string_view key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char ch : key) {
    const auto c = static_cast<std::uint8_t>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace

Subspace::Subspace(const Tuple& prefix, std::string_view raw_prefix) : prefix_(raw_prefix) {
  prefix.pack_into(prefix_);
}

Subspace Subspace::from_raw_prefix(std::string_view raw_prefix) {
  Subspace s;
  s.prefix_.assign(raw_prefix);
  return s;
}

std::string Subspace::pack(const Tuple& t) const {
  std::string out(prefix_);  // pack_into reserves the rest once
  t.pack_into(out);
  return out;
}

std::string Subspace::pack_with_versionstamp(const Tuple& t) const {
  return t.pack_with_versionstamp(prefix_);
}

Tuple Subspace::unpack(std::string_view key) const {
  if (!contains(key)) {
    throw Error(ErrorCode::kKeyOutsideSubspace, "key \"" + Printable(key) +
                                                    "\" is outside the subspace with prefix \"" +
                                                    Printable(prefix_) + "\"");
  }
  return Tuple::unpack(key.substr(prefix_.size()));
}

bool Subspace::contains(std::string_view key) const { return key.starts_with(prefix_); }

KeyRange Subspace::range(const Tuple& t) const {
  KeyRange r;
  r.begin = pack(t);
  r.end = r.begin;
  r.begin.push_back('\x00');
  r.end.push_back('\xff');
  return r;
}

Subspace Subspace::subspace(const Tuple& t) const { return from_raw_prefix(pack(t)); }

}  // namespace kvq
