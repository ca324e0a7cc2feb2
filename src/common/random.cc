#include "common/random.h"

#include <functional>
#include <random>
#include <thread>

namespace kvq::common {
namespace {

std::mt19937_64& thread_generator() {
  thread_local std::mt19937_64 generator([] {
    std::random_device device;
    const auto thread_hash = std::hash<std::thread::id>()(std::this_thread::get_id());
    std::seed_seq seq{device(),
                      device(),
                      device(),
                      device(),
                      static_cast<unsigned>(thread_hash),
                      static_cast<unsigned>(thread_hash >> 32)};
    return std::mt19937_64(seq);
  }());
  return generator;
}

}  // namespace

std::uint64_t random_u64() { return thread_generator()(); }

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t x = random_u64();
    for (std::size_t j = 0; j < 8 && i + j < n; ++j) out[i + j] = static_cast<char>(x >> (8 * j));
  }
  return out;
}

void seed_thread_random(std::uint64_t seed) { thread_generator().seed(seed); }

double random_unit() {
  return std::uniform_real_distribution<double>(0.0, 1.0)(thread_generator());
}

}  // namespace kvq::common
