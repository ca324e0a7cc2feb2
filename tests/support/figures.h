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

// Adds `value` to the figure `name` (a line "name<TAB>value" appended, in one write, to the file
// $KVQ_FIGURES_FILE names). Does nothing when the variable is unset or the file cannot be opened:
// figures are a report, never a test's outcome.
void record_figure(std::string_view name, std::int64_t value);

// The faults `db`'s engine injected, by kind, when it is a fault-injection engine (a fault URL
// such as memory:?unknown_result_rate=0.2, or engine::FaultInjectionEngine); otherwise nothing.
void record_faults(const Database& db);

// A whole-history check: the operations it checked and the violations it found.
void record_history(const history::Result& result);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_FIGURES_H_
