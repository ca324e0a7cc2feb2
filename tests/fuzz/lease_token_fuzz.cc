// libFuzzer target: lease tokens as users pass them back (Lease::from_text, the text `kvq ... take`
// prints) and as the layers decode them (the take id of a token for one queue). Malformed input
// must throw kvq::Error(invalid_lease_token); a token that decodes must print back to the same
// text and rebuild to the same bytes. Anything else is a finding. scripts/fuzz.sh runs it.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kvq/error.h"
#include "kvq/lease.h"
#include "kvq/subspace.h"
#include "kvq/tuple.h"
#include "layers/lease_token.h"

namespace {

// Runs `decode`; a kvq::Error other than invalid_lease_token aborts. Returns whether it decoded.
template <typename Decode>
bool decodes(Decode decode) {
  try {
    decode();
    return true;
  } catch (const kvq::Error& e) {
    if (e.code() != kvq::ErrorCode::kInvalidLeaseToken) std::abort();
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  kvq::Lease lease;
  if (decodes([&] { lease = kvq::Lease::from_text(input); }) && lease.token_text() != input) {
    std::abort();  // a second spelling of one token: from_text must accept one form only
  }
  static const std::string tag =
      kvq::detail::queue_tag(kvq::Subspace(kvq::Tuple().append("fuzz")), false);
  std::string id;
  if (decodes([&] { id = kvq::detail::token_take_id(input, tag); }) &&
      (id.size() != kvq::detail::kTakeIdSize || kvq::detail::make_token(tag, id) != input)) {
    std::abort();
  }
  return 0;
}
