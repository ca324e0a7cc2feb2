// Test support: high-contention requests written and read directly in the documented key layout
// (docs/queues.md, "High-contention pops"), so that tests know the order of requests: a "phantom"
// popper registers exactly as a real one does, and what was delivered to its slot can be read.
// Used by the Queue and FairQueue high-contention tests.
#ifndef KVQ_TESTS_SUPPORT_STAGED_REQUESTS_H_
#define KVQ_TESTS_SUPPORT_STAGED_REQUESTS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "kvq/kvq.h"

namespace kvq::testing {

class StagedRequests {
 public:
  // Requests under `control` (the structure's subspace + ("kvq",)) of `db`.
  StagedRequests(std::shared_ptr<Database> db, Subspace control)
      : db_(std::move(db)), control_(std::move(control)) {}

  // A 20-byte request id that starts, as every request id does, with its creation time (unix ms,
  // big-endian): now, so that the request expires request_ttl from now. `fill` makes the rest.
  static std::string request_id_created_now(char fill) {
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    return common::encode_be64(static_cast<std::uint64_t>(now_ms)) + std::string(12, fill);
  }
  // The slot key of request `id`.
  std::string slot_key(const std::string& id) const {
    return control_.pack(Tuple().append("slot").append(Bytes(id)));
  }
  // Registers a request for `count` pops for `id` exactly as a popper (or a combined group of
  // `count` pops) does; count 1 is written as kvq did before group requests, without the count.
  void add_phantom_request(const std::string& id, std::int64_t side = 0, std::int64_t count = 1) {
    Tuple request = Tuple().append(Bytes(id)).append(side);
    if (count != 1) request.append(count);
    db_->run([&](Transaction& tr) {
      tr.set_versionstamped_key(
          control_.pack_with_versionstamp(Tuple().append("req").append(Versionstamp::incomplete())),
          request.pack());
      std::string slot("\x00", 1);
      slot.append(10, '\0');
      slot.append("\x01\x00\x00\x00", 4);
      tr.set_versionstamped_value(slot_key(id), slot);
      tr.atomic_add(control_.pack(Tuple().append("waiting")), std::int64_t{1});
    });
  }
  // Writes the fulfiller lease as held by someone else for `for_how_long`.
  void hold_lease(std::chrono::milliseconds for_how_long) {
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    db_->run([&](Transaction& tr) {
      tr.set(control_.pack(Tuple().append("lease")),
             Tuple().append(Bytes("someone-else")).append(now + for_how_long.count()).pack());
    });
  }
  // Clears the fulfiller lease.
  void release_lease() {
    db_->run([&](Transaction& tr) { tr.clear(control_.pack(Tuple().append("lease"))); });
  }
  // The value at `key`, read in a transaction of its own.
  std::optional<std::string> get(const std::string& key) {
    return db_->run([&](Transaction& tr) { return tr.get(key); });
  }
  // The values delivered to `id`'s slot, in order (docs/queues.md: \x01 + le32 key length + key +
  // value; \x04 + key with the value in res; \x05 + (le32 key length + key + le32 value length +
  // value) per item); none if the slot is in another state.
  std::vector<std::string> delivered_items(const std::string& id) {
    auto s = get(slot_key(id));
    if (!s || s->empty()) return {};
    if ((*s)[0] == '\x04')
      return {get(control_.pack(Tuple().append("res").append(Bytes(id)))).value_or("?")};
    if ((*s)[0] == '\x01') return {s->substr(5 + common::decode_le32(s->substr(1)))};
    std::vector<std::string> out;
    for (std::size_t at = 1; (*s)[0] == '\x05' && at + 4 <= s->size();) {
      at += 4 + common::decode_le32(s->substr(at));  // the item's key
      const std::uint32_t n = common::decode_le32(s->substr(at));
      out.push_back(s->substr(at + 4, n));
      at += 4 + n;
    }
    return out;
  }
  // The values delivered to `id`'s slot joined by ","; "<absent>", "<empty>" (\x02) or
  // "<waiting>" when none was.
  std::string delivered(const std::string& id) {
    auto s = get(slot_key(id));
    if (!s || s->empty()) return "<absent>";
    if ((*s)[0] == '\x02') return "<empty>";
    std::vector<std::string> items = delivered_items(id);
    if (items.empty()) return "<waiting>";
    std::string out = items[0];
    for (std::size_t i = 1; i < items.size(); ++i) out += "," + items[i];
    return out;
  }
  // `n` phantom requests with ids "phantom-<i>" padded to 20 bytes, registered in order, a few
  // per transaction (etcd bounds the operations of one).
  std::vector<std::string> add_phantoms(int n, std::int64_t side = 0, std::int64_t count = 1) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      std::string id = "phantom-" + std::to_string(100000 + i);
      id.resize(20, '.');
      add_phantom_request(id, side, count);
      ids.push_back(id);
    }
    return ids;
  }
  // How many control keys ("kvq", `kind`, ...) exist: "req" for the waiting requests, "slot"...
  std::int64_t count(const char* kind) {
    return db_->run([&](Transaction& tr) {
      KeyRange r = control_.range(Tuple().append(kind));
      return static_cast<std::int64_t>(tr.get_range(r.begin, r.end).size());
    });
  }

 private:
  std::shared_ptr<Database> db_;
  Subspace control_;
};

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_STAGED_REQUESTS_H_
