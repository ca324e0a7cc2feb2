#include "support/layer_engines.h"

#include <cstdlib>

#include "kvq/error.h"
#include "support/engines.h"

namespace kvq::testing {

long env_int(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (end && *end == '\0' && n > 0) ? n : fallback;
}

std::vector<LayerEngine> layer_engines() {
  std::vector<LayerEngine> engines;
  for (const EngineFactory& f : conformance_engines()) {
    engines.push_back({f.name, [open = f.open](std::string* skip) -> std::shared_ptr<Database> {
                         try {
                           return open(EngineOptions{});
                         } catch (const Error& e) {
                           if (e.code() != ErrorCode::kConnectionFailed) throw;
                           *skip = e.what();
                           return nullptr;
                         }
                       }});
  }
  return engines;
}

}  // namespace kvq::testing
