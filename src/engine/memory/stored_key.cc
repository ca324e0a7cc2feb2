#include "engine/memory/stored_key.h"

#include <cstring>
#include <limits>

#include "kvq/error.h"

namespace kvq::engine {

StoredKey::StoredKey(std::string_view bytes) : size_(static_cast<std::uint32_t>(bytes.size())) {
  if (bytes.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(ErrorCode::kKeyTooLarge, "memory store: a key of over 4 GiB");
  }
  char* to = inline_;
  if (size_ > kInline) {
    heap_ = new char[size_];
    to = heap_;
  }
  if (size_ > 0) std::memcpy(to, bytes.data(), size_);
}

StoredKey::~StoredKey() {
  if (size_ > kInline) delete[] heap_;
}

}  // namespace kvq::engine
