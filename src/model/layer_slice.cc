#include "model/layer_slice.h"

#include <cstring>

#include "base/error.h"
#include "model/config.h"

namespace grove {

GgufWriter LayerSliceWriter(const GgufFile& source, int32_t n_layers) {
  const ModelConfig config = ConfigFromGguf(source);
  if (n_layers < 1 || n_layers > config.n_layer) {
    Fail("slice: ", n_layers, " layers requested, the model has ", config.n_layer);
  }
  GgufWriter w(source.alignment());
  for (const auto& [key, value] : source.metadata()) w.SetValue(key, value);
  w.SetUint32(config.arch + ".block_count", static_cast<uint32_t>(n_layers));
  // A per-layer window pattern keeps the entries of the layers kept.
  const std::string pattern_key = config.arch + ".attention.sliding_window_pattern";
  if (const GgufValue* pattern = source.Find(pattern_key);
      pattern && pattern->type == GgufValueType::kArray) {
    GgufValue kept = *pattern;
    kept.array.resize(static_cast<std::size_t>(n_layers));
    w.SetValue(pattern_key, kept);
  }
  w.SetString("general.name", config.name + (config.name.empty() ? "" : " ") + "first " +
                                  std::to_string(n_layers) + " layers");
  for (const GgufTensor& t : source.tensors()) {
    if (t.name.rfind("blk.", 0) == 0 && std::stoi(t.name.substr(4)) >= n_layers) continue;
    const GgufTensor* tensor = &t;
    w.AddTensor(t.name, t.shape, t.type, [tensor](std::span<uint8_t> out) {
      std::memcpy(out.data(), tensor->data, out.size());
    });
  }
  return w;
}

}  // namespace grove
