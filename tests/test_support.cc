#include "test_support.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <system_error>
#include <vector>

#include "base/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace grove::testing {
namespace {

// A test binary run outside ctest (which sets it empty) keeps nothing in the user's cache: its
// temporary models' packed weights would otherwise push the user's own out of the budget. A
// directory the caller set is kept.
[[maybe_unused]] const bool kNoUserCache = ::setenv("GROVE_CACHE_DIR", "", /*overwrite=*/0) == 0;

}  // namespace

std::string SharedPath(const std::string& relative) {
  const char* env = std::getenv("GROVE_SHARED_DIR");
  std::string dir = env && *env ? env : GROVE_SHARED_DIR;
  return dir + "/" + relative;
}

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool PartialFileLeft(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + ".";
  std::error_code ec;
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > 8 &&
        name.compare(name.size() - 8, 8, ".partial") == 0)
      return true;
  }
  return false;
}

namespace {

// Every path TempPath hands out, removed (file or directory tree) when the test binary exits, so
// runs leave nothing behind in the temporary directory whatever the test did with the path.
class TempPaths {
 public:
  ~TempPaths() {
    for (const std::string& path : paths_) {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  }
  std::string Add(std::string path) {
    std::lock_guard<std::mutex> lock(mutex_);
    paths_.push_back(path);
    return path;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> paths_;
};

}  // namespace

std::string TestNameOf(std::string name) {
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  static TempPaths paths;
  // The process number alone repeats across runs on a fresh machine (CI's release and sanitizer
  // runs start thousands of processes each); a random tag per process keeps a path from meeting
  // anything an earlier, crashed run left behind.
  static const std::string tag = [] {
    std::random_device device;
    return std::to_string(::getpid()) + "_" + std::to_string(device() % 1000000);
  }();
  return paths.Add(::testing::TempDir() + "grove_" + tag + "_" + std::to_string(counter++) + "_" +
                   name);
}

std::string TempDirectory(const std::string& name) {
  const std::string path = TempPath(name);
  std::filesystem::create_directories(path);
  return path;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult RunShellCommand(const std::string& command, const std::string& out,
                              const std::string& err) {
  const int status = std::system((command + " >" + out + " 2>" + err).c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadWholeFile(out);
  r.err = ReadWholeFile(err);
  return r;
}

std::unique_ptr<Model> MakeRandomModel(const RandomModelSpec& spec, const ModelOptions& options) {
  const std::string path = TempPath(spec.name + ".gguf");
  RandomModelWriter(spec).WriteFile(path);
  auto model = Model::Load(path, options);
  std::remove(path.c_str());  // the map keeps the data alive
  return model;
}

bool ForkContinuesAsParent(Model& model, std::span<const int32_t> tokens, int32_t split) {
  Batch batch;
  const int32_t parent = model.kv().Acquire();
  model.ForwardChain(tokens.first(split), 0, parent, batch, false);
  const int32_t child = model.kv().Fork(parent, split);
  const std::span<const int32_t> rest = tokens.subspan(split);
  const std::span<const float> a = model.ForwardChain(rest, split, parent, batch, true);
  const std::vector<float> a_copy(a.begin(), a.end());
  const std::span<const float> b = model.ForwardChain(rest, split, child, batch, true);
  return std::equal(b.begin(), b.end(), a_copy.begin());
}

void WriteRelabelledModel(const RandomModelSpec& spec, const std::string& new_arch,
                          const std::string& path, const std::function<void(GgufWriter&)>& edit) {
  const std::string src = TempPath(spec.name + "-original.gguf");
  RandomModelWriter(spec).WriteFile(src);
  auto file = GgufFile::Open(src);
  GgufWriter w(file->alignment());
  const std::string prefix = spec.arch + ".";
  for (const auto& [key, value] : file->metadata()) {
    w.SetValue(key.rfind(prefix, 0) == 0 ? new_arch + "." + key.substr(prefix.size()) : key, value);
  }
  w.SetString("general.architecture", new_arch);
  if (edit) edit(w);
  for (const GgufTensor& t : file->tensors()) {
    const GgufTensor* tensor = &t;
    w.AddTensor(t.name, t.shape, t.type, [tensor](std::span<uint8_t> out) {
      std::memcpy(out.data(), tensor->data, out.size());
    });
  }
  w.WriteFile(path);
}

void WriteModelWithTensorType(const RandomModelSpec& spec, const std::string& path,
                              const std::string& tensor, GgmlType type) {
  const std::string src = TempPath(spec.name + "-before-retype.gguf");
  RandomModelWriter(spec).WriteFile(src);
  auto file = GgufFile::Open(src);
  GgufWriter w(file->alignment());
  for (const auto& [key, value] : file->metadata()) w.SetValue(key, value);
  bool found = false;
  for (const GgufTensor& t : file->tensors()) {
    if (t.name == tensor) {
      found = true;
      w.AddTensor(t.name, t.shape, type,
                  std::vector<uint8_t>(GgmlRowBytes(type, t.shape[0]) * t.shape[1]));
    } else {
      w.AddTensor(t.name, t.shape, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    }
  }
  if (!found) Fail("WriteModelWithTensorType: no tensor '", tensor, "'");
  w.WriteFile(path);
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

std::vector<const KernelSet*> AvailableKernelLevels() {
  std::vector<const KernelSet*> levels;
  for (KernelLevel level : {KernelLevel::kScalar, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    if (const KernelSet* k = KernelsForLevel(level)) levels.push_back(k);
  }
  return levels;
}

std::vector<float> RandomNormal(std::size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::span<const int32_t> StepAlone(SpeculativeSession& session, Model& target, Batch& batch) {
  session.Draft();
  batch.Clear();
  session.AppendVerify(batch);
  return session.Accept(target.Forward(batch));
}

AloneAndTogether DecodeAloneAndTogether(Model& target, std::span<Drafter* const> drafters,
                                        const SpeculationPolicy& policy,
                                        std::span<const SessionOptions> options,
                                        std::span<const std::vector<int32_t>> prompts) {
  const std::size_t n = drafters.size();
  AloneAndTogether out{.alone = std::vector<std::vector<int32_t>>(n),
                       .together = std::vector<std::vector<int32_t>>(n)};
  std::vector<std::unique_ptr<SpeculativeSession>> sessions;
  for (std::size_t i = 0; i < n; ++i) {
    SpeculativeSession alone(target, *drafters[i], policy, options[i]);
    out.alone[i] = alone.Generate(prompts[i], {});
    sessions.push_back(
        std::make_unique<SpeculativeSession>(target, *drafters[i], policy, options[i]));
  }
  for (std::size_t i = 0; i < n; ++i) sessions[i]->Start(prompts[i]);
  const auto all_done = [&] {
    return std::all_of(sessions.begin(), sessions.end(), [](const auto& s) { return s->done(); });
  };
  Batch batch;
  while (!all_done()) {
    batch.Clear();
    for (const auto& s : sessions) {
      if (s->done()) continue;
      s->Draft();
      s->AppendVerify(batch);
    }
    const std::span<const float> logits = target.Forward(batch);
    for (std::size_t i = 0; i < n; ++i) {
      if (sessions[i]->done()) continue;
      const std::span<const int32_t> accepted = sessions[i]->Accept(logits);
      out.together[i].insert(out.together[i].end(), accepted.begin(), accepted.end());
    }
  }
  return out;
}

}  // namespace grove::testing
