#include "test_support.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>

#include "io/gguf_writer.h"

namespace grove::testing {

std::string SharedPath(const std::string& relative) {
  const char* env = std::getenv("GROVE_SHARED_DIR");
  std::string dir = env && *env ? env : GROVE_SHARED_DIR;
  return dir + "/" + relative;
}

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  return ::testing::TempDir() + "grove_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++) + "_" + name;
}

std::unique_ptr<Model> MakeRandomModel(const RandomModelSpec& spec, const ModelOptions& options) {
  const std::string path = TempPath(spec.name + ".gguf");
  RandomModelWriter(spec).WriteFile(path);
  auto model = Model::Load(path, options);
  std::remove(path.c_str());  // the map keeps the data alive
  return model;
}

RandomModelSpec TinySpec(GgmlType type, uint64_t seed) {
  RandomModelSpec s;
  s.name = "tiny";
  s.n_vocab = 320;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_ctx = 256;
  s.type = type;
  s.seed = seed;
  return s;
}

}  // namespace grove::testing
