#include "layers/contention/control.h"

#include <algorithm>
#include <chrono>

#include "common/bytes.h"
#include "common/clock.h"
#include "common/random.h"
#include "kvq/error.h"
#include "kvq/lease.h"
#include "kvq/tuple.h"

namespace kvq::contention {
namespace {

constexpr char kWaitingByte = '\x00';
constexpr char kDeliveredByte = '\x01';
constexpr char kEmptyByte = '\x02';
constexpr char kBatonByte = '\x03';
constexpr char kDeliveredInResByte = '\x04';
constexpr char kDeliveredManyByte = '\x05';
constexpr std::size_t kIdRandomSize = 12;
constexpr std::size_t kStampSize = common::kVersionstampSize;

Error truncated_slot() { return Error(ErrorCode::kCorruption, "queue: truncated delivered slot"); }

// Reads le32(len) + len bytes at *pos of `v`, advancing *pos.
std::string_view next_field(std::string_view v, std::size_t* pos) {
  if (v.size() < *pos + 4) throw truncated_slot();
  const std::uint32_t n = common::decode_le32(v.substr(*pos));
  *pos += 4;
  if (v.size() - *pos < n) throw truncated_slot();
  std::string_view field = v.substr(*pos, n);
  *pos += n;
  return field;
}

Slot decode_delivered_one(std::string_view v) {
  std::size_t pos = 1;
  Slot s;
  s.kind = Slot::kDelivered;
  std::string_view key = next_field(v, &pos);
  s.items.push_back(KeyValue{std::string(key), std::string(v.substr(pos))});
  return s;
}

Slot decode_delivered_many(std::string_view v) {
  std::size_t pos = 1;
  Slot s;
  s.kind = Slot::kDelivered;
  while (pos < v.size()) {
    std::string_view key = next_field(v, &pos);
    std::string_view value = next_field(v, &pos);
    s.items.push_back(KeyValue{std::string(key), std::string(value)});
  }
  if (s.items.empty()) throw truncated_slot();
  return s;
}

void append_field(std::string* out, std::string_view field) {
  out->append(common::encode_le32(static_cast<std::uint32_t>(field.size())));
  out->append(field);
}

Slot decode_slot(std::string_view v) {
  Slot s;
  if (v.empty()) throw Error(ErrorCode::kCorruption, "queue: empty pop slot");
  switch (v[0]) {
    case kWaitingByte:
    case kBatonByte:
      if (v.size() != 1 + kStampSize) throw Error(ErrorCode::kCorruption, "queue: bad pop slot");
      s.kind = v[0] == kWaitingByte ? Slot::kWaiting : Slot::kBaton;
      s.stamp = std::string(v.substr(1));
      return s;
    case kDeliveredByte:
      return decode_delivered_one(v);
    case kDeliveredManyByte:
      return decode_delivered_many(v);
    case kDeliveredInResByte:
      s.kind = Slot::kDelivered;
      s.items.push_back(KeyValue{std::string(v.substr(1)), {}});
      s.value_in_res = true;
      return s;
    case kEmptyByte:
      s.kind = Slot::kEmpty;
      return s;
    default:
      throw Error(ErrorCode::kCorruption, "queue: unknown pop slot state");
  }
}

}  // namespace

void check_options(const HighContentionOptions& options) {
  // (Larger batches are cut to the engine's limits anyway; the bound keeps batch_size + 1 an int.)
  if (options.batch_size < 1 || options.batch_size > kMaxBatchSize) {
    throw Error(
        ErrorCode::kInvalidOptionValue,
        "queue: contention.batch_size must be between 1 and " + std::to_string(kMaxBatchSize));
  }
  // (Longer ones would overflow the millisecond clock values they are added to.)
  const auto positive_and_bounded = [](std::chrono::milliseconds d) {
    return d.count() >= 1 && d <= kMaxWorkDuration;
  };
  if (!positive_and_bounded(options.lease) || !positive_and_bounded(options.request_ttl)) {
    throw Error(ErrorCode::kInvalidOptionValue,
                "queue: contention.lease and contention.request_ttl must be > 0 and at most 10 "
                "years (kMaxWorkDuration)");
  }
}

KeyRange held_range(const ItemRange& items) {
  if (items.held_prefix.empty()) return {};
  return {items.held_prefix + '\x00', items.held_prefix + '\xff'};
}

void set_held(Transaction& tr, const ItemRange& items, std::string_view item_key, bool hold) {
  if (items.held_prefix.empty()) return;
  const std::string key = items.held_prefix + std::string(item_key.substr(items.prefix_size));
  if (hold) {
    tr.set(key, "");
  } else {
    tr.clear(key);
  }
}

void add_size(Transaction& tr, const ItemRange& items, std::int64_t delta) {
  tr.atomic_add(items.size_key, delta);
  if (!items.total_key.empty()) tr.atomic_add(items.total_key, delta);
}

std::int64_t now_ms() { return common::wall_now_us() / 1000; }

ControlKeys::ControlKeys(const Subspace& control)
    : control_(control),
      slot_begin_(control.pack(Tuple().append("slot")) + '\x00'),
      lease_(control.pack(Tuple().append("lease"))),
      waiting_(control.pack(Tuple().append("waiting"))) {
  KeyRange reqs = control.range(Tuple().append("req"));
  req_begin_ = reqs.begin;
  req_end_ = reqs.end;
}

std::string ControlKeys::slot(std::string_view id) const {
  return control_.pack(Tuple().append("slot").append(Bytes(id)));
}
std::string ControlKeys::res(std::string_view id) const {
  return control_.pack(Tuple().append("res").append(Bytes(id)));
}
std::string ControlKeys::slot_id(std::string_view slot_key) const {
  return control_.unpack(slot_key).get_bytes(1).data;
}
std::string ControlKeys::req(std::string_view stamp) const {
  return control_.pack(Tuple().append("req").append(Versionstamp::complete(stamp)));
}
std::string ControlKeys::req_placeholder() const {
  return control_.pack_with_versionstamp(Tuple().append("req").append(Versionstamp::incomplete()));
}
std::string ControlKeys::slot_before(std::int64_t unix_ms) const {
  return slot(common::encode_be64(static_cast<std::uint64_t>(unix_ms)));
}

std::string new_request_id() {
  return common::encode_be64(static_cast<std::uint64_t>(now_ms())) +
         common::random_bytes(kIdRandomSize);
}

std::string encode_request(const RequestValue& r) {
  return Tuple()
      .append(Bytes(r.id))
      .append(static_cast<std::int64_t>(r.side))
      .append(r.count)
      .pack();
}

RequestValue decode_request(std::string_view value) {
  Tuple t = Tuple::unpack(value);
  RequestValue r{t.get_bytes(0).data, static_cast<Side>(t.get_int(1)), 1};
  if (t.size() > 2) r.count = std::clamp<std::int64_t>(t.get_int(2), 1, kMaxRequestCount);
  return r;
}

std::int64_t request_created_ms(std::string_view id) {
  return static_cast<std::int64_t>(common::decode_be64(id));
}

Slot read_slot(Transaction& tr, const std::string& key, bool snapshot) {
  auto v = tr.get(key, snapshot);
  if (!v) return Slot{};
  return decode_slot(*v);
}

std::string waiting_slot_placeholder() {
  std::string v(1, kWaitingByte);
  v.append(kStampSize, '\0');
  v.append("\x01\x00\x00\x00", 4);  // the placeholder's offset: 1, little-endian
  return v;
}

std::string baton_slot(std::string_view stamp) {
  return std::string(1, kBatonByte) + std::string(stamp);
}

std::optional<std::string> delivered_inline(std::span<const KeyValue* const> items) {
  if (items.size() == 1) {
    const KeyValue& item = *items[0];
    if (5 + item.key.size() + item.value.size() > kMaxValueSize) return std::nullopt;
    std::string v(1, kDeliveredByte);
    append_field(&v, item.key);
    v += item.value;
    return v;
  }
  std::size_t size = 1;
  for (const KeyValue* item : items) size += delivered_entry_size(*item);
  if (size > kMaxValueSize) return std::nullopt;
  std::string v(1, kDeliveredManyByte);
  v.reserve(size);
  for (const KeyValue* item : items) {
    append_field(&v, item->key);
    append_field(&v, item->value);
  }
  return v;
}

std::size_t delivered_entry_size(const KeyValue& item) {
  return 8 + item.key.size() + item.value.size();
}

std::string delivered_in_res(std::string_view item_key) {
  return std::string(1, kDeliveredInResByte) + std::string(item_key);
}

std::string empty_slot() { return std::string(1, kEmptyByte); }

std::string lease_value(std::string_view holder, std::int64_t expiry_ms) {
  return Tuple().append(Bytes(holder)).append(expiry_ms).pack();
}

std::optional<Lease> read_lease(Transaction& tr, const ControlKeys& keys, bool snapshot) {
  auto v = tr.get(keys.lease(), snapshot);
  if (!v) return std::nullopt;
  Tuple t = Tuple::unpack(*v);
  return Lease{t.get_bytes(0).data, t.get_int(1)};
}

std::vector<std::string> first_request_ids(Transaction& tr, const ControlKeys& keys, int n,
                                           bool snapshot) {
  std::vector<std::string> ids;
  for (const KeyValue& request :
       tr.get_range(keys.req_begin(), keys.req_end(), {.limit = n, .snapshot = snapshot})) {
    ids.push_back(decode_request(request.value).id);
  }
  return ids;
}

}  // namespace kvq::contention
