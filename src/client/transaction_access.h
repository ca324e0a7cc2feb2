// Internal: what kvq's own layers may do to a kvq::Transaction beyond its public API.
#ifndef KVQ_SRC_CLIENT_TRANSACTION_ACCESS_H_
#define KVQ_SRC_CLIENT_TRANSACTION_ACCESS_H_

#include <string_view>

#include "kvq/database.h"

namespace kvq::detail {

class TransactionAccess {
 public:
  // Adds a read-conflict range over [begin, end) exactly as a non-snapshot range read of it adds
  // one: less the keys and ranges this transaction has set or cleared (a read there is answered
  // by those writes; keys with pending atomic adds still conflict). Transaction::
  // add_read_conflict_range covers them too, as FoundationDB's does; on etcd every key of them
  // would then cost a compare. For a layer that read with a snapshot read and decides afterwards
  // how much of the range it depends on.
  static void add_read_conflict_as_read(Transaction& tr, std::string_view begin,
                                        std::string_view end);
  // Adds a read-conflict range over `key` alone, as Transaction::add_read_conflict_key, for a key
  // the caller knows has no value at the read version unless this transaction read it (a read
  // covers it anyway): a key it made up with random bytes no one else can make up (an idempotency
  // marker: an earlier attempt's write of it is read back by run_once before this attempt). On
  // etcd the commit then needs no read of the key.
  static void add_read_conflict_on_absent_key(Transaction& tr, std::string_view key);
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_CLIENT_TRANSACTION_ACCESS_H_
