// Internal: the one source of randomness of kvq's own code (ids, jitter, sampling): a per-thread
// 64-bit generator seeded from std::random_device and the thread's id. Not for cryptography.
//
// Example:
//   std::string id = kvq::common::random_bytes(20);   // as the recipes' os.urandom(20)
//   if (kvq::common::random_u64() % 64 == 0) { ... }  // now and then
#ifndef KVQ_SRC_COMMON_RANDOM_H_
#define KVQ_SRC_COMMON_RANDOM_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvq::common {

// A uniformly distributed 64-bit value from this thread's generator.
std::uint64_t random_u64();
// `n` bytes from this thread's generator.
std::string random_bytes(std::size_t n);
// A uniformly distributed double in [0, 1).
double random_unit();
// Reseeds this thread's generator with `seed`, so that what follows draws the same values for the
// same seed (the simulator, common/simulated_clock.h).
void seed_thread_random(std::uint64_t seed);

}  // namespace kvq::common

#endif  // KVQ_SRC_COMMON_RANDOM_H_
