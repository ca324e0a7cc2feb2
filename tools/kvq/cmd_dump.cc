// `kvq dump`: every key of the database (decoded as a FoundationDB tuple where it is one) and its
// value, one pair per line, in key order.
#include <iostream>
#include <memory>

#include "tools/kvq/commands.h"

namespace kvq::cli {
namespace {

constexpr int kPage = 1000;  // pairs read per transaction

// `key` as a tuple ("(\"Q\", \"default\", 0, b\"...\")"), else as escaped bytes (b"...").
std::string format_key(const std::string& key) {
  try {
    return Tuple::unpack(key).to_string();
  } catch (const Error&) {
    return "b\"" + escape(key) + "\"";
  }
}

// Prints every pair with prefix <= key < "\xff", a page per snapshot transaction.
int dump(Database& db, const std::string& prefix) {
  std::string begin = prefix;
  const std::string end = "\xff";
  for (;;) {
    auto page = db.run([&](Transaction& tr) {
      return tr.get_range(begin, end, {.limit = kPage, .snapshot = true});
    });
    for (const auto& kv : page) {
      std::cout << format_key(kv.key) << " = \"" << escape(kv.value) << "\"\n";
    }
    if (page.size() < static_cast<std::size_t>(kPage)) return kExitOk;
    begin = page.back().key + '\x00';
  }
}

}  // namespace

void add_dump_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("dump", "print every key (decoded as a tuple) and value");
  set_action(cmd, ctx, [&ctx] { return dump(*ctx.open(), ""); });
}

}  // namespace kvq::cli
