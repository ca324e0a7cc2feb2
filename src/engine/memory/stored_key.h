// Internal: the key of a memory-store map node, its bytes inside the node when they fit.
//
// A range read or a lookup descends the store's tree comparing the probe with one key per level.
// With std::string keys, every key longer than its 15-byte small buffer (all of kvq's: a
// subspace prefix and a tuple) lives in a heap block of its own, so each level costs two cache
// misses: the node, then its key. StoredKey keeps up to kInline bytes in the node (the queue,
// fair-queue and control keys of kvq's layers fit), so a level costs the node's lines only; longer
// keys go to the heap as before. Immutable once made, neither copied nor moved (a map node is
// built in place and never moves).
//
// Example:
//   std::map<StoredKey, int, StoredKey::Less> m;
//   m.emplace(std::piecewise_construct, std::forward_as_tuple("q/1"), std::forward_as_tuple(7));
//   m.find(std::string_view("q/1"))->first.view() == "q/1";
#ifndef KVQ_SRC_ENGINE_MEMORY_STORED_KEY_H_
#define KVQ_SRC_ENGINE_MEMORY_STORED_KEY_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvq::engine {

class StoredKey {
 public:
  // Bytes kept in the node: the key, its size and the node's tree links fill two cache lines.
  static constexpr std::size_t kInline = 52;

  explicit StoredKey(std::string_view bytes);
  ~StoredKey();
  StoredKey(const StoredKey&) = delete;
  StoredKey& operator=(const StoredKey&) = delete;

  std::string_view view() const { return {size_ <= kInline ? inline_ : heap_, size_}; }

  // Orders keys bytewise (as std::string does), and compares them with std::string_views
  // without building a key (a transparent comparator).
  struct Less {
    using is_transparent = void;
    static std::string_view of(const StoredKey& k) { return k.view(); }
    static std::string_view of(std::string_view k) { return k; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return of(a) < of(b);
    }
  };

 private:
  std::uint32_t size_;
  union {
    char inline_[kInline];
    char* heap_;
  };
};

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_MEMORY_STORED_KEY_H_
