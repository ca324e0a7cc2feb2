// libFuzzer target: Tuple::unpack on arbitrary bytes. Accepted input must be canonical (packing
// the decoded tuple gives the input back, with the versionstamp offset for one incomplete stamp)
// and printable; rejected input must throw kvq::Error(invalid_tuple) naming the offset. Anything
// else (a crash, another exception, a sanitizer report) is a finding. scripts/fuzz.sh runs it.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kvq/tuple.h"

namespace {

int count_incomplete(const kvq::Tuple& t) {
  int n = 0;
  for (const kvq::TupleElement& e : t.elements()) {
    if (const auto* v = std::get_if<kvq::Versionstamp>(&e)) n += v->is_complete() ? 0 : 1;
    if (const auto* nested = std::get_if<kvq::Tuple>(&e)) n += count_incomplete(*nested);
  }
  return n;
}

void check_canonical(const kvq::Tuple& t, const std::string& bytes) {
  (void)t.to_string();
  const int incomplete = count_incomplete(t);
  if (incomplete == 0 && t.pack() != bytes) std::abort();
  if (incomplete == 1) {
    const std::string with_offset = t.pack_with_versionstamp();
    if (with_offset.substr(0, with_offset.size() - 4) != bytes) std::abort();
  }
  if (!(kvq::Tuple::unpack(bytes) == t)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  kvq::Tuple t;
  try {
    t = kvq::Tuple::unpack(bytes);
  } catch (const kvq::Error& e) {
    if (e.code() != kvq::ErrorCode::kInvalidTuple) std::abort();
    if (std::string(e.what()).find("at offset") == std::string::npos) std::abort();
    return 0;
  }
  check_canonical(t, bytes);
  return 0;
}
