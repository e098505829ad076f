// grove info MODEL: what a GGUF file holds (metadata, tensor table, types, sizes).
#include <cstdio>
#include <map>
#include <string>

#include "base/error.h"
#include "commands.h"
#include "io/gguf.h"
#include "model/config.h"

namespace grove::cli {
namespace {

std::string ScalarText(const GgufValue::Scalar& s) {
  if (const auto* u = std::get_if<uint64_t>(&s)) return std::to_string(*u);
  if (const auto* i = std::get_if<int64_t>(&s)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&s)) return StrCat(*d);
  return std::get<bool>(s) ? "true" : "false";
}

std::string Quoted(const std::string& s, std::size_t max = 60) {
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    unsigned char c = s[i];
    if (c == '\n')
      out += "\\n";
    else if (c < 0x20)
      out += StrCat("\\x", std::hex, int{c});
    else
      out += static_cast<char>(c);
  }
  return out + (s.size() > max ? "...'" : "'");
}

std::string ValueText(const GgufValue& v) {
  if (v.type == GgufValueType::kString) return Quoted(v.string);
  if (v.type != GgufValueType::kArray) return ScalarText(v.scalar);
  std::string out = StrCat("[", v.array_size(), " ", GgufValueTypeName(v.element_type), ":");
  const std::size_t shown = std::min<std::size_t>(v.array_size(), 6);
  for (std::size_t i = 0; i < shown; ++i) {
    out += " " + (v.strings.empty() ? ScalarText(v.array[i]) : Quoted(v.strings[i], 24));
  }
  return out + (v.array_size() > shown ? " ...]" : "]");
}

std::string Bytes(uint64_t n) {
  char buf[32];
  if (n >= (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.2f GiB", n / 1073741824.0);
  else if (n >= (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.2f MiB", n / 1048576.0);
  else if (n >= 1024)
    std::snprintf(buf, sizeof(buf), "%.1f KiB", n / 1024.0);
  else
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(n));
  return buf;
}

void RunInfo(const std::string& path, bool all_tensors) {
  auto gguf = GgufFile::Open(path);
  std::printf("file: %s\nformat: GGUF v%u, %s, alignment %llu, data at offset %llu\n", path.c_str(),
              gguf->version(), Bytes(gguf->file_size()).c_str(),
              static_cast<unsigned long long>(gguf->alignment()),
              static_cast<unsigned long long>(gguf->data_offset()));
  std::printf("\nmetadata (%zu keys):\n", gguf->metadata().size());
  for (const auto& [key, value] : gguf->metadata()) {
    std::printf("  %-44s %s\n", key.c_str(), ValueText(value).c_str());
  }
  std::map<std::string, std::pair<int, uint64_t>> by_type;
  uint64_t total_bytes = 0;
  int64_t total_elements = 0;
  for (const GgufTensor& t : gguf->tensors()) {
    auto& entry = by_type[std::string(GgmlTypeName(t.type))];
    ++entry.first;
    entry.second += t.n_bytes;
    total_bytes += t.n_bytes;
    total_elements += t.n_elements();
  }
  std::printf("\ntensors (%zu, %.2f M elements, %s):\n", gguf->tensors().size(),
              total_elements / 1e6, Bytes(total_bytes).c_str());
  for (const auto& [type, e] : by_type) {
    std::printf("  %-6s %4d tensors  %s\n", type.c_str(), e.first, Bytes(e.second).c_str());
  }
  std::printf("\n  %-32s %-18s %-6s %12s %14s\n", "name", "shape", "type", "size", "offset");
  std::size_t shown = 0;
  for (const GgufTensor& t : gguf->tensors()) {
    // Past the first blocks the table repeats itself layer after layer; --all shows everything.
    if (!all_tensors && shown >= 24) {
      std::printf("  ... %zu more (use --all)\n", gguf->tensors().size() - shown);
      break;
    }
    std::printf("  %-32s %-18s %-6s %12s %14llu\n", t.name.c_str(), t.shape_string().c_str(),
                std::string(GgmlTypeName(t.type)).c_str(), Bytes(t.n_bytes).c_str(),
                static_cast<unsigned long long>(t.offset));
    ++shown;
  }
  ModelConfig c;
  try {
    c = ConfigFromGguf(*gguf);
  } catch (const Error& e) {
    std::printf("\nmodel: grove does not run this file: %s\n", e.what());
    return;
  }
  std::printf(
      "\nmodel: %s (%s), %.2f M parameters, %d layers, width %d, %d heads (%d KV), head dim %d, "
      "FFN %d, vocab %d, context %d, rope base %g%s\n",
      c.arch.c_str(), std::string(c.family->models).c_str(), c.n_params() / 1e6, c.n_layer,
      c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab, c.n_ctx_train,
      c.rope.freq_base, c.tied_output ? ", tied output" : "");
  if (c.rope.freq_scale != 1.0f) {
    const double factor = 1.0 / c.rope.freq_scale;
    if (c.yarn.ext_factor > 0.0f) {
      std::printf("rope scaling: yarn %gx from a context of %d (ext %g, beta %g/%g)\n", factor,
                  c.rope_orig_ctx, c.yarn.ext_factor, c.yarn.beta_fast, c.yarn.beta_slow);
    } else {
      std::printf("rope scaling: linear %gx\n", factor);
    }
  }
  if (c.n_expert > 0) {
    std::printf("experts: %d per layer, %d used per token, each FFN %d\n", c.n_expert,
                c.n_expert_used, c.n_ff_expert);
  }
  if (c.sliding_window > 0) {
    std::printf(
        "sliding window: %d tokens on %d of %d layers%s\n", c.sliding_window, c.n_local_layers(),
        c.n_layer,
        c.local_rope ? StrCat(" (rope base ", c.rope_local.freq_base, " there)").c_str() : "");
  }
  for (const std::string& note : c.notes) std::printf("note: %s\n", note.c_str());
}

}  // namespace

void AddInfoCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show a GGUF file's metadata, tensors, types and sizes");
  auto path = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  cmd->add_option("model", *path, "GGUF file")->required();
  cmd->add_flag("--all", *all, "List every tensor (default: the first 24)");
  cmd->callback([path, all] { RunInfo(*path, *all); });
}

}  // namespace grove::cli
