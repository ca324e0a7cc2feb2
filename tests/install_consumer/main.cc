// Built against an installed kvq by scripts/check-install.sh: packs a tuple key, round-trips it
// through the in-memory engine, and exits non-zero on any mismatch.
#include <kvq/kvq.h>

#include <iostream>

int main() {
  kvq::Subspace space(kvq::Tuple().append("consumer"));
  const std::string key = space.pack(kvq::Tuple().append(42).append("x"));
  auto db = kvq::open("memory:");
  db->run([&](kvq::Transaction& tr) { tr.set(key, "value"); });
  auto value = db->run([&](kvq::Transaction& tr) { return tr.get(key); });
  if (!value || *value != "value" || space.unpack(key).get_int(0) != 42) {
    std::cerr << "consumer: round trip failed\n";
    return 1;
  }
  std::cout << "consumer: found kvq, read back " << space.unpack(key).to_string() << "\n";
  return 0;
}
