// Internal: the bytes of a lease token (kvq::Lease::token):
//   'L' (format 1) + 8 bytes naming the queue (FNV-1a of its subspace prefix and kind) + the
//   16-byte take id.
// The queue tag lets an ack of another queue's lease fail as invalid_lease_token instead of as
// lease_lost. Lease::token_text() / from_text() (lease_token.cc) print it as base64url.
#ifndef KVQ_SRC_LAYERS_LEASE_TOKEN_H_
#define KVQ_SRC_LAYERS_LEASE_TOKEN_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "kvq/subspace.h"

namespace kvq::detail {

// The size of a take id.
inline constexpr std::size_t kTakeIdSize = 16;

// The tag of the queue stored under `subspace` (prioritized: a PriorityQueue).
std::string queue_tag(const Subspace& subspace, bool prioritized);
// The token of take `id` (kTakeIdSize bytes) of the queue with `tag`.
std::string make_token(std::string_view tag, std::string_view id);
// The take id of `token`. Throws invalid_lease_token if it is malformed or of another queue.
std::string token_take_id(std::string_view token, std::string_view tag);

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_LEASE_TOKEN_H_
