// The leases the clients of one `kvq simulate` seed hold, for the check that the store fences
// them: no item is delivered (popped or taken) while a lease on it still holds. A lease taken at
// simulated time S for `vt` holds at least until S + vt (the store computes its deadline from a
// clock read during the take, so not before S); an extend started at X for `vt` that succeeded
// makes it run out at X + vt or a little later (sooner than before, if that is sooner); an ack or
// nack gives it up when it starts. Only the latest
// lease on an item counts (an older one's holder finds it gone: lease_lost).
#ifndef KVQ_TOOLS_KVQ_HELD_LEASES_H_
#define KVQ_TOOLS_KVQ_HELD_LEASES_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "kvq/lease.h"

namespace kvq::cli {

class HeldLeases {
 public:
  // What is wrong with a delivery of `value` that returned at `now`: a description if a lease
  // on it still holds then, else nullopt.
  std::optional<std::string> check_delivery(const std::string& value, common::SteadyTime now) const;
  // The leases of `tenant` (Lease::tenant, a FairQueue's) whose take returned before event
  // `before` (taken(): `returned`) and that still hold at `now`: those a take that started at
  // event `before` and returned at `now` must have found held.
  int held_by_tenant(const std::string& tenant, std::int64_t before, common::SteadyTime now) const;
  // `lease` was taken by a take that started at `started`, for `vt`, and returned at event
  // `returned` (a counter of the run's events).
  void taken(const Lease& lease, common::SteadyTime started, std::chrono::milliseconds vt,
             std::int64_t returned);
  // An extend of `lease` by `vt`, started at `started`, succeeded.
  void extended(const Lease& lease, common::SteadyTime started, std::chrono::milliseconds vt);
  // The holder of `lease` starts to ack or nack it.
  void released(const Lease& lease);

 private:
  struct Held {
    std::string token;
    std::string tenant;
    common::SteadyTime until;
    std::int64_t returned = 0;
  };
  std::unordered_map<std::string, Held> by_value_;
};

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_HELD_LEASES_H_
