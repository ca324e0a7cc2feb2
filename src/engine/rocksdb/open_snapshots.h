// Internal: the RocksDB snapshots a RocksDbStore has handed out and not yet released, by the
// version each shows, so that the store can release those that fell below the pipeline's MVCC
// floor (forget_before) although a transaction still holds them. Without this, a transaction
// kept alive after its reads (a caller waiting on a user, a Transaction parked in a struct) kept
// its RocksDB snapshot for as long as it lived: every key overwritten or deleted since stayed on
// disk, although the pipeline already refused its reads as transaction_too_old.
//
// A Member is registered when made and removes itself when destroyed; release_below() asks each
// member below the floor to release its snapshot, and forgets those that did (one that a read is
// using stays for a later call: a commit must not wait for a long range read).
//
// Example:
//   class Snap : public OpenSnapshots::Member { bool try_release() override { ... } };
//   auto open = std::make_shared<OpenSnapshots>();
//   Snap s;  open->add(7, s);
//   open->release_below(8);   // s.try_release() ran; s's destructor calls open->remove(s)
#ifndef KVQ_SRC_ENGINE_ROCKSDB_OPEN_SNAPSHOTS_H_
#define KVQ_SRC_ENGINE_ROCKSDB_OPEN_SNAPSHOTS_H_

#include <map>
#include <mutex>

#include "engine/pipeline/versioned_store.h"

namespace kvq::engine::rocksdb_engine {

class OpenSnapshots {
 public:
  class Member {
   public:
    // Releases the RocksDB snapshot now, unless a read through it is under way (false then);
    // reads through the member must afterwards throw transaction_too_old. Called with
    // OpenSnapshots' lock held; once it returned true, not again.
    virtual bool try_release() = 0;

   protected:
    Member() = default;
    ~Member() = default;
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;

   private:
    friend class OpenSnapshots;
    std::multimap<Version, Member*>::iterator entry_;  // while registered
    bool registered_ = false;                          // guarded by OpenSnapshots' lock
  };

  // Registers `m`, which shows `version`, until remove(m) or release_below passes it.
  void add(Version version, Member& m);
  // Unregisters `m` (if release_below has not already); its destructor must call this.
  void remove(Member& m);
  // Calls try_release() on every member showing a version below `floor`, and forgets those that
  // released.
  void release_below(Version floor);

 private:
  std::mutex mu_;
  std::multimap<Version, Member*> members_;  // guarded by mu_
};

}  // namespace kvq::engine::rocksdb_engine

#endif  // KVQ_SRC_ENGINE_ROCKSDB_OPEN_SNAPSHOTS_H_
