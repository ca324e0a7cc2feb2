// Internal: a hint to the CPU that the calling thread is spinning on a value another thread will
// change (x86 `pause`, ARM `yield`): it saves power and lets a sibling hyperthread run. Does
// nothing on other architectures.
//
// Example:
//   while (!ready.load(std::memory_order_acquire)) kvq::common::cpu_relax();
#ifndef KVQ_SRC_COMMON_CPU_RELAX_H_
#define KVQ_SRC_COMMON_CPU_RELAX_H_

namespace kvq::common {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace kvq::common

#endif  // KVQ_SRC_COMMON_CPU_RELAX_H_
