// Internal (etcd engine): kvq watches over etcd's Watch API. One thread per armed watch reads an
// etcd Watch stream on the key's base and delta records from version + 1 and, on any event,
// fires if the key's value differs from the value seen: the value the events show if they end in
// a put of the base record (a set: no read), else the current value, read. Opening the stream
// fails over between members (and past replaced channels) for the failover budget, so a watch
// armed after a member restarts comes back; a stream that breaks once open (its member
// restarted, or lost its leader) is opened again from the same revision, with a new failover
// budget, so the watch fires as if it had never broken; only a stream that cannot be opened within
// the budget fails the watch (connection_failed). A monitor thread cancels the streams of watches
// that finished elsewhere (cancelled, or the engine stopping).
//
// Example:
//   Watcher watcher(cluster);
//   watcher.start(key, value_seen, read_version, state);   // state fires or fails later
//   watcher.stop();                                         // fails what is still armed
#ifndef KVQ_SRC_ENGINE_ETCD_WATCHER_H_
#define KVQ_SRC_ENGINE_ETCD_WATCHER_H_

#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>

#include "engine/engine.h"
#include "engine/etcd/cluster.h"
#include "engine/watch_state.h"

namespace kvq::engine::etcd {

// The watches of one engine. Thread-safe.
class Watcher {
 public:
  explicit Watcher(std::shared_ptr<Cluster> cluster) : cluster_(std::move(cluster)) {}
  ~Watcher() { stop(); }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Arms `state` for `key` (see Engine::watch). After stop(), fails it with operation_cancelled.
  void start(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state);
  // Fails every armed watch with operation_cancelled and joins the threads. Idempotent; never
  // throws.
  void stop() noexcept;

 private:
  struct Active {
    std::shared_ptr<grpc::ClientContext> ctx;  // of the current stream attempt
    std::shared_ptr<detail::WatchState> state;
    std::thread thread;
    bool done = false;  // the thread has finished (join it, then drop the entry)
  };
  using Entry = std::list<Active>::iterator;
  class Run;

  void monitor();
  // Fails `state` with too_many_watches: `e` said a thread could not be started.
  static void fail_for_want_of_a_thread(detail::WatchState& state, const std::system_error& e);
  // A fresh context for the next stream attempt of `self`; nullptr if the watch is over.
  std::shared_ptr<grpc::ClientContext> next_context(Entry self);
  void finish(Entry self);

  std::shared_ptr<Cluster> cluster_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::list<Active> watches_;
  std::thread monitor_;
};

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_WATCHER_H_
