#include "layers/work_keys.h"

#include "kvq/error.h"
#include "kvq/tuple.h"

namespace kvq::detail {

KeyRange due_timers(const Subspace& control) { return control.range(Tuple().append("due")); }

std::string due_before_key(const Subspace& control, std::int64_t unix_us) {
  return control.pack(Tuple().append("due").append(unix_us));
}

std::string leased_counter(const Subspace& control) {
  return control.pack(Tuple().append("leased"));
}

WorkKeys::WorkKeys(const Subspace& control)
    : control_(control),
      due_(due_timers(control)),
      taken_(control.range(Tuple().append("tk"))),
      leased_(leased_counter(control)),
      delayed_(control.pack(Tuple().append("delayed"))),
      dead_(control.subspace(Tuple().append("dead"))) {}

std::string WorkKeys::due(const Timer& t) const {
  Tuple key = Tuple()
                  .append("due")
                  .append(t.due_us)
                  .append(Bytes(t.id))
                  .append(static_cast<std::int64_t>(t.kind))
                  .append(t.attempts)
                  .append(t.priority)
                  .append(Bytes(t.base));
  if (!t.tail.empty()) key.append(Bytes(t.tail));  // (timers without one keep 7 elements)
  return control_.pack(key);
}

Timer WorkKeys::parse_due(std::string_view key) const {
  try {
    const Tuple t = control_.unpack(key);
    const std::int64_t kind = t.get_int(3);
    if ((t.size() != 7 && t.size() != 8) || t.get_string(0) != "due" || (kind != 0 && kind != 1)) {
      throw Error(ErrorCode::kCorruption, "bad timer");
    }
    return Timer{t.get_int(1),
                 t.get_bytes(2).data,
                 static_cast<Timer::Kind>(kind),
                 static_cast<int>(t.get_int(4)),
                 t.get_int(5),
                 t.get_bytes(6).data,
                 t.size() == 8 ? t.get_bytes(7).data : std::string()};
  } catch (const Error&) {
    throw Error(ErrorCode::kCorruption, "queue: not a timer key");
  }
}

std::string WorkKeys::due_before(std::int64_t unix_us) const {
  return due_before_key(control_, unix_us);
}

std::string WorkKeys::taken(std::string_view id) const {
  return control_.pack(Tuple().append("tk").append(Bytes(id)));
}

}  // namespace kvq::detail
