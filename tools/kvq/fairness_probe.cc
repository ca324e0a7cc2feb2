#include "tools/kvq/fairness_probe.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <unordered_map>

#include "tools/kvq/simulation.h"

namespace kvq::cli {
namespace {

constexpr std::string_view kPrefix = "probe-";

// The weighted round-robin (the tenants' `weights`), tenant-order and same-items checks of the
// values popped (their tenants in `tenant_of`) against those pushed, `expected`.
std::vector<std::string> check_probe(std::vector<std::string> expected,
                                     std::vector<std::string> popped,
                                     const std::unordered_map<std::string, std::string>& tenant_of,
                                     const std::unordered_map<std::string, std::int64_t>& weights) {
  std::vector<std::string> problems;
  std::vector<std::string> tenants;
  for (const std::string& v : popped) tenants.push_back(tenant_of.at(v));
  const auto weight_of = [&](const std::string& tenant) { return weights.at(tenant); };
  if (const std::string why = history::weighted_round_break(tenants, weight_of); !why.empty()) {
    problems.push_back("fairness probe: weighted round-robin broken: " + why);
  }
  // Within a tenant, in push order: the popped values of one tenant are increasing.
  std::unordered_map<std::string, std::size_t> last;
  for (const std::string& v : popped) {
    const std::size_t n = std::stoul(v.substr(kPrefix.size()));
    auto [it, first] = last.emplace(tenant_of.at(v), n);
    if (!first && it->second > n) problems.push_back("fairness probe: out of tenant order: " + v);
    it->second = n;
  }
  std::sort(expected.begin(), expected.end());
  std::sort(popped.begin(), popped.end());
  if (expected != popped) problems.push_back("fairness probe: the pops are not the items pushed");
  return problems;
}

}  // namespace

std::string set_random_weight(Target& target, std::mt19937_64& rng) {
  const std::string tenant = "t" + std::to_string(rng() % 3);
  const auto weight = static_cast<std::int64_t>(1 + rng() % 3);
  target.set_weight(tenant, weight);
  return tenant + "=" + std::to_string(weight);
}

ProbeResult probe_fairness(Target& target, std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ (kSeedMix * 3));
  std::vector<std::string> expected;
  std::unordered_map<std::string, std::string> tenant_of;
  std::unordered_map<std::string, std::int64_t> weights;
  for (int t = 0; t < 3; ++t) {
    const std::string tenant = "t" + std::to_string(t);
    weights[tenant] = static_cast<std::int64_t>(1 + rng() % 3);
    target.set_weight(tenant, weights[tenant]);
    for (std::uint64_t n = 1 + rng() % 6; n > 0; --n) {
      Item item{std::string(kPrefix) + std::to_string(expected.size()), 0, tenant};
      target.push({item}, std::chrono::milliseconds(0));
      tenant_of[item.value] = item.tenant;
      expected.push_back(item.value);
    }
  }
  ProbeResult r;
  r.pushed = static_cast<std::int64_t>(expected.size());
  while (std::optional<std::string> v = target.pop(history::PopKind::kFifo)) {
    if (!tenant_of.contains(*v)) {
      r.problems.push_back("fairness probe: popped a value it did not push: " + *v);
      return r;
    }
    r.popped.push_back(std::move(*v));
  }
  r.problems = check_probe(expected, r.popped, tenant_of, weights);
  return r;
}

}  // namespace kvq::cli
