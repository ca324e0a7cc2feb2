// Test support: the figures of one run of the test command (docs/reliability.md). Tests record
// what they injected and checked; scripts/test.sh points KVQ_FIGURES_FILE at a file per build
// configuration and scripts/figures.sh sums them into a table.
#ifndef KVQ_TESTS_SUPPORT_FIGURES_H_
#define KVQ_TESTS_SUPPORT_FIGURES_H_

#include <cstdint>
#include <string_view>

#include "kvq/database.h"
#include "tools/kvq/history.h"

namespace kvq::testing {

// The figures more than one test adds to (one spelling each, so that they sum into one row).
inline constexpr std::string_view kOperationsChecked =
    "history: operations checked (pushes, pops, empty pops, items left)";
inline constexpr std::string_view kViolations =
    "history: violations (lost, duplicated, invented, out of order)";
inline constexpr std::string_view kEtcdMemberKills =
    "kills: etcd members SIGKILLed and restarted mid-workload";
inline constexpr std::string_view kClientProcessKills =
    "kills: client processes SIGKILLed mid-workload";
inline constexpr std::string_view kUrlsRefused = "bad inputs: URLs kvq::open refused";

// Adds `value` to the figure `name` (a line "name<TAB>value" appended, in one write, to the file
// $KVQ_FIGURES_FILE names). Does nothing when the variable is unset or the file cannot be opened:
// figures are a report, never a test's outcome.
void record_figure(std::string_view name, std::int64_t value);

// The faults `db`'s engine injected, by kind, when it is a fault-injection engine (a fault URL
// such as memory:?unknown_result_rate=0.2, or engine::FaultInjectionEngine); otherwise nothing.
void record_faults(const Database& db);

// Faults injected, by kind (the rows record_faults adds to).
void record_fault_counts(std::int64_t unknown_applied, std::int64_t unknown_not_applied,
                         std::int64_t conflicts, std::int64_t too_old);

// A whole-history check: the operations it checked and the violations it found.
void record_history(const history::Result& result);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_FIGURES_H_
