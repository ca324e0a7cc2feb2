#include "support/fault_urls.h"

#include "support/engines.h"
#include "support/etcd_cluster.h"

namespace kvq::testing {

std::vector<std::string> faulty_urls(const std::string& query) {
  std::vector<std::string> urls = {"memory:?" + query};
#ifdef KVQ_WITH_ROCKSDB
  urls.push_back("rocksdb:" + fresh_temp_dir("kvq-fault-url") + "/db?" + query);
#endif
#ifdef KVQ_WITH_ETCD
  std::string why;
  std::string etcd = fresh_shared_etcd_url(query, &why);
  if (!etcd.empty()) urls.push_back(etcd);
#endif
  return urls;
}

}  // namespace kvq::testing
