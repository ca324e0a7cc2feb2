#include "layers/contention/stats.h"

namespace kvq::detail {

ContentionStats& contention_stats() {
  static ContentionStats stats;
  return stats;
}

}  // namespace kvq::detail
