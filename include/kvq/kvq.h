// kvq/kvq.h: the whole public API in one include.
//
//   #include <kvq/kvq.h>
//   auto db = kvq::open("memory:");
//   kvq::PriorityQueue pq(db, kvq::Subspace(kvq::Tuple().append("P")));
#ifndef KVQ_KVQ_H_
#define KVQ_KVQ_H_

#include "kvq/database.h"
#include "kvq/error.h"
#include "kvq/fair_queue.h"
#include "kvq/lease.h"
#include "kvq/priority_queue.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"
#include "kvq/tuple.h"

#endif  // KVQ_KVQ_H_
