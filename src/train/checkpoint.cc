#include "train/checkpoint.h"

#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "io/gguf.h"

namespace grove {
namespace {

constexpr const char* kSettingsPrefix = "grove.train.setting.";

}  // namespace

CheckpointSettings OptimizerSettings(const OptimizerConfig& c) {
  return {
      {"steps", std::to_string(c.steps)}, {"warmup", std::to_string(c.warmup)},
      {"lr", FormatDouble(c.lr)},         {"min_lr_ratio", FormatDouble(c.min_lr_ratio)},
      {"beta1", FormatDouble(c.beta1)},   {"beta2", FormatDouble(c.beta2)},
      {"eps", FormatDouble(c.eps)},       {"weight_decay", FormatDouble(c.weight_decay)},
      {"clip", FormatDouble(c.clip)},
  };
}

std::string FormatDouble(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

const std::vector<std::string>& TokenTexts(const GgufKeyValues& keys) {
  for (const auto& [key, value] : keys) {
    if (key == "tokenizer.ggml.tokens") return value.strings;
  }
  Fail("train: tokenizer has no tokenizer.ggml.tokens");
}

void SaveCheckpoint(const std::string& path, const ParamLayout& layout, const RunState& state,
                    const AdamW& adam, const GgufKeyValues& tokenizer, const std::string& name,
                    const CheckpointSettings& settings, const GgufKeyValues& extra) {
  GgufWriter w = TrainedModelWriter(layout, state.params.data(), tokenizer, GgmlType::kF32, name);
  for (const auto& [key, value] : extra) w.SetValue(key, value);
  w.SetUint64("grove.train.step", static_cast<uint64_t>(state.step));
  w.SetUint64("grove.train.elapsed_ms", static_cast<uint64_t>(state.elapsed_s * 1000.0));
  w.SetString("grove.train.last_valid_loss", FormatDouble(state.last_valid_loss));
  for (const auto& [key, value] : settings) w.SetString(kSettingsPrefix + key, value);
  for (const ParamTensor& t : layout.tensors()) {
    w.AddF32Tensor("adam_m." + t.name, t.shape,
                   {adam.m().data() + t.offset, static_cast<std::size_t>(t.size)});
    w.AddF32Tensor("adam_v." + t.name, t.shape,
                   {adam.v().data() + t.offset, static_cast<std::size_t>(t.size)});
  }
  w.WriteFile(path);
}

// Reads the run state and loads the optimizer's moments into `adam`.
RunState LoadCheckpoint(const std::string& path, const ParamLayout& layout,
                        const GgufKeyValues& tokenizer, const std::string& tokenizer_path,
                        const CheckpointSettings& settings, AdamW& adam) {
  auto file = GgufFile::Open(path);
  const std::string where = StrCat("train: checkpoint '", path, "'");
  LoadedTrainModel model = LoadTrainModel(*file);
  if (model.shape != layout.shape()) {
    Fail(where, " is a model of ", DescribeTrainShape(model.shape), ", but this run asks for ",
         DescribeTrainShape(layout.shape()), "; use the same settings to resume, or another --out");
  }
  if (TokenTexts(model.tokenizer) != TokenTexts(tokenizer)) {
    Fail(where, " was trained with another tokenizer than '", tokenizer_path, "'");
  }
  for (const auto& [key, value] : settings) {
    const std::string stored = file->GetString(kSettingsPrefix + key);
    if (stored != value) {
      Fail(where, " was made with ", key, " = '", stored, "', but this run has '", value,
           "'; use the same settings to resume, or another --out");
    }
  }
  RunState s;
  s.params = ReadLayoutParams(*file, layout);
  for (const ParamTensor& t : layout.tensors()) {
    for (auto [prefix, dst] : {std::pair{"adam_m.", &adam.m()}, std::pair{"adam_v.", &adam.v()}}) {
      const GgufTensor& g = file->GetTensor(prefix + t.name);
      if (g.type != GgmlType::kF32 || g.shape != t.shape)
        Fail(where, ": tensor '", g.name, "' has the wrong type or shape");
      std::memcpy(dst->data() + t.offset, g.data, static_cast<std::size_t>(t.size) * sizeof(float));
    }
  }
  s.step = static_cast<int64_t>(file->GetUint("grove.train.step"));
  if (s.step > std::stoll(file->GetString(std::string(kSettingsPrefix) + "steps")))
    Fail(where, ": step is past the end");
  s.elapsed_s = static_cast<double>(file->GetUint("grove.train.elapsed_ms", 0)) / 1000.0;
  s.last_valid_loss =
      std::strtod(file->GetString("grove.train.last_valid_loss", "nan").c_str(), nullptr);
  return s;
}

}  // namespace grove
