// libFuzzer target: the database URL parser and the option readers every engine URL goes through
// before anything is opened (scheme and query parsing, fault-injection options, the embedded
// engines' pipeline options). Malformed input must throw kvq::Error(connection_string_invalid or
// invalid_option_value); anything else is a finding. scripts/fuzz.sh runs it.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "common/url.h"
#include "engine/pipeline/commit_pipeline.h"
#include "engine/testing/fault_injection.h"
#include "kvq/error.h"

namespace {

bool expected(kvq::ErrorCode code) {
  return code == kvq::ErrorCode::kConnectionStringInvalid ||
         code == kvq::ErrorCode::kInvalidOptionValue;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view url(reinterpret_cast<const char*>(data), size);
  try {
    kvq::detail::ParsedUrl parsed = kvq::detail::parse_url(url);
    std::map<std::string, std::string> query = parsed.query;
    (void)kvq::engine::take_fault_options(query);
    (void)kvq::pipeline::pipeline_options_from_query(query);
    kvq::detail::reject_unknown_options(parsed, query);
  } catch (const kvq::Error& e) {
    if (!expected(e.code())) std::abort();
  }
  return 0;
}
