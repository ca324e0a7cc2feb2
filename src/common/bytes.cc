#include "common/bytes.h"

#include <algorithm>

namespace kvq::common {

std::string key_after(std::string_view key) {
  std::string out;
  out.reserve(key.size() + 1);
  out.append(key);
  out.push_back('\0');
  return out;
}

std::string encode_le64(std::int64_t v) {
  std::string out(8, '\0');
  auto u = static_cast<std::uint64_t>(v);
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((u >> (8 * i)) & 0xff);
  return out;
}

std::int64_t decode_le64(std::string_view bytes) {
  std::uint64_t u = 0;
  for (std::size_t i = 0; i < 8 && i < bytes.size(); ++i) {
    u |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return static_cast<std::int64_t>(u);
}

std::string encode_be64(std::uint64_t v) {
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[7 - i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

std::uint64_t decode_be64(std::string_view bytes) {
  std::uint64_t u = 0;
  for (std::size_t i = 0; i < 8 && i < bytes.size(); ++i) {
    u = (u << 8) | static_cast<unsigned char>(bytes[i]);
  }
  return u;
}

std::string encode_le32(std::uint32_t v) {
  std::string out(4, '\0');
  for (std::size_t i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

std::uint32_t decode_le32(std::string_view bytes) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

std::string add_le(const std::optional<std::string>& existing, std::string_view operand) {
  std::string out(operand.size(), '\0');
  unsigned carry = 0;
  for (std::size_t i = 0; i < operand.size(); ++i) {
    unsigned a =
        (existing && i < existing->size()) ? static_cast<unsigned char>((*existing)[i]) : 0;
    unsigned sum = a + static_cast<unsigned char>(operand[i]) + carry;
    out[i] = static_cast<char>(sum & 0xff);
    carry = sum >> 8;
  }
  return out;
}

std::optional<std::uint32_t> versionstamp_offset(std::string_view with_offset) {
  if (with_offset.size() < 4) return std::nullopt;
  const std::size_t body = with_offset.size() - 4;
  const std::uint32_t offset = decode_le32(with_offset.substr(body));
  if (static_cast<std::uint64_t>(offset) + kVersionstampSize > body) return std::nullopt;
  return offset;
}

std::optional<std::string> splice_versionstamp(std::string_view with_offset,
                                               std::string_view stamp) {
  std::optional<std::uint32_t> offset = versionstamp_offset(with_offset);
  if (!offset) return std::nullopt;
  std::string out(with_offset.substr(0, with_offset.size() - 4));
  out.replace(*offset, kVersionstampSize, stamp);
  return out;
}

std::string_view base64_digits(Base64 alphabet) {
  return alphabet == Base64::kUrl
             ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
             : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string base64(std::string_view bytes, Base64 alphabet) {
  const std::string_view digits = base64_digits(alphabet);
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += digits[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += digits[(acc << (6 - bits)) & 63];
  if (alphabet == Base64::kStandard) out.append((4 - out.size() % 4) % 4, '=');
  return out;
}

std::vector<KeyRange> merge_ranges(std::vector<KeyRange> ranges) {
  std::erase_if(ranges, [](const KeyRange& r) { return !(r.begin < r.end); });
  std::sort(ranges.begin(), ranges.end(),
            [](const KeyRange& a, const KeyRange& b) { return a.begin < b.begin; });
  std::vector<KeyRange> out;
  out.reserve(ranges.size());
  for (KeyRange& r : ranges) {
    if (!out.empty() && r.begin <= out.back().end) {
      if (out.back().end < r.end) out.back().end = std::move(r.end);
    } else {
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<KeyRange> subtract_ranges(std::vector<KeyRange> ranges, std::vector<KeyRange> minus) {
  const std::vector<KeyRange> cut = merge_ranges(std::move(minus));
  std::vector<KeyRange> out;
  auto next_cut = cut.begin();
  for (KeyRange& r : merge_ranges(std::move(ranges))) {
    while (next_cut != cut.end() && next_cut->end <= r.begin) ++next_cut;
    // The cuts from next_cut on that start before r ends split r; each leaves the part before it.
    for (auto c = next_cut; c != cut.end() && c->begin < r.end; ++c) {
      if (r.begin < c->begin) out.push_back({r.begin, c->begin});
      r.begin = std::max(r.begin, c->end);
    }
    if (r.begin < r.end) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kvq::common
