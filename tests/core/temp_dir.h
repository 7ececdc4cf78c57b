// Test helpers for files: a fresh temporary directory and a whole-file read, shared by the tests
// of core/files.h and of graph/io.h.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace placelab::testing {

// A fresh empty directory under the system temp dir (named after `prefix`, the process and a
// counter), removed by the destructor.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "placelab_test_") {
    static int n = 0;
    path = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // The names in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

// The whole file, as bytes.
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace placelab::testing
