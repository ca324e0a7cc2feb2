// Test helper: a fresh, private temporary directory, removed (recursively) on destruction.
#ifndef KVQ_TESTS_SUPPORT_TEMP_DIR_H_
#define KVQ_TESTS_SUPPORT_TEMP_DIR_H_

#include <string>

namespace kvq::testing {

class TempDir {
 public:
  // Creates $TMPDIR/kvq-<prefix>-XXXXXX (TMPDIR defaults to /tmp). Throws std::runtime_error if
  // it cannot. Not thread-safe per object; distinct objects are independent.
  explicit TempDir(const std::string& prefix = "test");
  // Removes the directory and everything in it; errors are ignored.
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The directory's absolute path.
  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The path of a helper program built next to the running test binary (tests/workers/<name>.cc
// becomes <build>/tests/<name>). Throws std::runtime_error if it does not exist.
std::string worker_path(const std::string& name);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_TEMP_DIR_H_
