#include "engine/etcd/watcher.h"

#include <algorithm>
#include <chrono>
#include <system_error>
#include <vector>

#include "engine/etcd/key_group.h"
#include "engine/etcd/responses.h"
#include "kvq/error.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;

// The thread body of one watch.
class Watcher::Run {
 public:
  Run(Watcher& watcher, Entry self, std::string key, std::optional<std::string> value_seen,
      Version version)
      : watcher_(watcher),
        cluster_(*watcher.cluster_),
        self_(self),
        etcd_key_(cluster_.codec().encode(key)),
        value_seen_(std::move(value_seen)),
        seen_at_(version) {}

  void operator()() {
    std::shared_ptr<detail::WatchState> state;
    {
      std::lock_guard lock(watcher_.mu_);
      state = self_->state;
    }
    try {
      watch(*state);
    } catch (const Error& e) {
      if (!state->ready()) state->fail(e);
    }
    watcher_.finish(self_);
  }

 private:
  using Stream = grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>;

  // Opens a stream (failing over for the failover budget) and follows it. A stream that breaks
  // before the watch fires (a member restarted, or lost its leader) is opened again from the same
  // start revision, with a new failover budget: the events it missed are sent again, so the
  // watch fires as if the stream had never broken (if that revision was compacted meanwhile, as
  // read() handles it). A watch cancelled or stopped meanwhile is not opened again.
  void watch(detail::WatchState& state) {
    auto start = Cluster::Clock::now();
    bool renewed = false;
    for (int attempt = 1;; ++attempt) {
      std::shared_ptr<grpc::ClientContext> ctx = watcher_.next_context(self_);
      if (!ctx) return;  // fired, cancelled or stopping meanwhile
      const std::uint64_t generation = cluster_.auth().attach(*ctx);
      // etcd then refuses the stream from a member without a leader and ends it when the member
      // loses its leader (etcd's "hasleader" metadata, as clientv3's WithRequireLeader), so a
      // member cut off from the others cannot hold a watch that will never see a write.
      ctx->AddMetadata("hasleader", "true");
      const std::size_t i = cluster_.preferred();
      std::shared_ptr<const Stubs> stubs = cluster_.endpoint(i).stubs();
      std::unique_ptr<Stream> stream = stubs->watch->Watch(ctx.get());
      pb::WatchResponse first;
      grpc::Status s;
      if (stream->Write(create_request()) && stream->Read(&first)) {
        cluster_.endpoint(i).note(stubs, grpc::Status::OK);
        if (renewed || !refused_for_token(first)) {
          const Turn ended = follow(state, *ctx, *stream, std::move(first));
          if (ended == Turn::kFired) return;
          // Broke (or its start revision was compacted, the value unchanged): open it again,
          // from the same revision (or the one the value was read at), after a pause (a member
          // that keeps accepting streams and dropping them must not make this a busy loop),
          // preferring the next member if it broke.
          start = Cluster::Clock::now();
          attempt = 0;
          renewed = false;
          if (ended != Turn::kWatchAgain) cluster_.move_on(i);
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        // Named step: the token may have expired; renew it once and open the stream again.
        renewed = true;
        ctx->TryCancel();
        stream->Finish();
        s = cluster_.auth().renew(*stubs, generation, cluster_.options().rpc_timeout);
        if (s.ok()) continue;
      } else {
        s = stream->Finish();
        cluster_.endpoint(i).note(stubs, s);
      }
      if (!is_transport_error(s) ||
          Cluster::Clock::now() - start >= cluster_.options().failover_budget) {
        throw Error(ErrorCode::kConnectionFailed,
                    "etcd watch: cannot open stream (" + describe(s) + ")");
      }
      cluster_.move_on(i);
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100 * attempt, 500)));
    }
  }

  // True if etcd refused to create the watch in `first` for its auth token (etcd 3.4 cancels
  // it with the reason "... etcdserver: invalid auth token"): a new token may cure that.
  bool refused_for_token(const pb::WatchResponse& first) const {
    return cluster_.auth().enabled() && first.canceled() &&
           token_refused(grpc::Status(grpc::StatusCode::UNKNOWN, first.cancel_reason()));
  }

  pb::WatchRequest create_request() const {
    pb::WatchRequest request;
    pb::WatchCreateRequest* create = request.mutable_create_request();
    create->set_key(etcd_key_);
    create->set_range_end(KeyCodec::group_end(etcd_key_));  // the base and its delta records
    create->set_start_revision(seen_at_ + 1);
    return request;
  }

  // What a response means for the watch; what ended a stream (kWait: it broke, or the server
  // or this watch's cancellation ended it).
  enum class Turn { kWait, kFired, kWatchAgain };

  // Reads responses until the watch fires (kFired), must be opened again from a later revision
  // (kWatchAgain), or the stream ends (kWait).
  Turn follow(detail::WatchState& state, grpc::ClientContext& ctx, Stream& stream,
              pb::WatchResponse response) {
    do {
      const Turn turn = read(response);
      if (turn == Turn::kWait) continue;
      ctx.TryCancel();  // the stream is still open: end it
      stream.Finish();
      if (turn == Turn::kFired) state.fire();
      return turn;
    } while (stream.Read(&response));
    stream.Finish();
    return Turn::kWait;
  }

  // kFired if `response` shows the value changed. Its start revision compacted (the server
  // cancelled the watch), the current value decides: changed, kFired; the same, kWatchAgain from
  // the revision it was read at. Throws if the server cancelled the watch otherwise.
  Turn read(const pb::WatchResponse& response) {
    switch (decode_watch_response(response)) {
      case WatchNews::kNothing:
        return Turn::kWait;
      case WatchNews::kEvents: {
        const std::string* shown = value_shown(response);
        const bool changed =
            shown != nullptr ? *shown != value_seen_ : current_value() != value_seen_;
        return changed ? Turn::kFired : Turn::kWait;
      }
      case WatchNews::kCompacted:
        return current_value(&seen_at_) != value_seen_ ? Turn::kFired : Turn::kWatchAgain;
    }
    return Turn::kWait;
  }

  // The key's value at the last revision of `response`'s events, if a put of its base record at
  // that revision shows it (a base record hides the key's delta records of its revision and
  // earlier: KeyGroup::live): a plain set, as of a slot or a lease. nullptr otherwise (a delta, a
  // delete): current_value() must read it.
  const std::string* value_shown(const pb::WatchResponse& response) const {
    std::int64_t last = 0;
    for (const mvccpb::Event& e : response.events()) last = std::max(last, e.kv().mod_revision());
    for (const mvccpb::Event& e : response.events()) {
      if (e.type() == mvccpb::Event::PUT && e.kv().mod_revision() == last &&
          e.kv().key() == etcd_key_) {
        return &e.kv().value();
      }
    }
    return nullptr;
  }

  // The current kvq value of the key (base plus deltas), at the latest revision (the revision it
  // was read at in *revision, if given).
  std::optional<std::string> current_value(Version* revision = nullptr) {
    pb::RangeRequest rr;
    rr.set_key(etcd_key_);
    rr.set_range_end(KeyCodec::group_end(etcd_key_));
    pb::RangeResponse resp = cluster_.range(rr, "watch");
    if (revision != nullptr) *revision = resp.header().revision();
    std::vector<KeyGroup> groups = group_records(cluster_.codec(), resp.kvs());
    if (groups.empty()) return std::nullopt;
    return groups[0].value();
  }

  Watcher& watcher_;
  Cluster& cluster_;
  const Entry self_;
  const std::string etcd_key_;
  const std::optional<std::string> value_seen_;
  // The revision at which the key is known to hold value_seen_: the watch starts after it.
  Version seen_at_;
};

void Watcher::start(std::string key, std::optional<std::string> value_seen, Version version,
                    std::shared_ptr<detail::WatchState> state) {
  std::lock_guard lock(mu_);
  if (stopping_) {
    state->fail(Error(ErrorCode::kOperationCancelled, "etcd: engine shut down"));
    return;
  }
  try {
    if (!monitor_.joinable()) monitor_ = std::thread([this] { monitor(); });
  } catch (const std::system_error& e) {
    fail_for_want_of_a_thread(*state, e);
    return;
  }
  watches_.push_back(Active{std::make_shared<grpc::ClientContext>(), state, {}});
  const Entry it = std::prev(watches_.end());
  try {
    // The thread starts by taking mu_, so it sees its entry complete.
    it->thread = std::thread(Run(*this, it, std::move(key), std::move(value_seen), version));
  } catch (const std::system_error& e) {
    watches_.erase(it);
    fail_for_want_of_a_thread(*state, e);
  }
}

// Out of threads (a process or container limit): the watch fails, and the commit that armed it
// stands (it must not throw: it committed).
void Watcher::fail_for_want_of_a_thread(detail::WatchState& state, const std::system_error& e) {
  state.fail(Error(ErrorCode::kTooManyWatches,
                   std::string("etcd: cannot start a thread for the watch: ") + e.what()));
}

std::shared_ptr<grpc::ClientContext> Watcher::next_context(Entry self) {
  std::lock_guard lock(mu_);
  if (stopping_ || self->state->ready()) return nullptr;
  self->ctx = std::make_shared<grpc::ClientContext>();
  return self->ctx;
}

void Watcher::finish(Entry self) {
  std::lock_guard lock(mu_);
  self->done = true;
  self->state.reset();
}

void Watcher::monitor() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(50));
    for (auto it = watches_.begin(); it != watches_.end();) {
      if (it->done) {
        if (it->thread.joinable()) it->thread.join();
        it = watches_.erase(it);
        continue;
      }
      if (stopping_ || (it->state && it->state->ready())) it->ctx->TryCancel();
      ++it;
    }
  }
}

void Watcher::stop() noexcept {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (Active& w : watches_) {
      if (w.state && !w.state->ready()) {
        w.state->fail(Error(ErrorCode::kOperationCancelled, "etcd: engine shut down"));
      }
      w.ctx->TryCancel();
    }
  }
  cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  {
    std::lock_guard lock(mu_);
    for (Active& w : watches_) {
      if (w.thread.joinable()) threads.push_back(std::move(w.thread));
    }
  }
  for (std::thread& t : threads) t.join();
  std::lock_guard lock(mu_);
  watches_.clear();
}

}  // namespace kvq::engine::etcd
