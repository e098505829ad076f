#include "tokenize/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "base/bounded_json.h"
#include "base/error.h"
#include "io/gguf_writer.h"
#include "tokenize/pretokenizer.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Bounded (base/bounded_json.h): every walk below and the dumps in messages recurse.
Json ParseJson(std::string_view text, std::string_view what) {
  return ParseBoundedJson(text, StrCat("convert-tokenizer: ", what));
}

// obj[key], or null when obj is not an object or has no such key: a reference, so that large
// members (a vocabulary's merges) are not copied.
const Json& Member(const Json& obj, const char* key) {
  static const Json kNull;
  if (!obj.is_object()) return kNull;
  const auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

// A string (or boolean) member; `fallback` when it is absent or null; any other type is refused,
// naming the field (nlohmann's value() would throw its own type_error, which names neither the
// file nor the key).
std::string StringField(const Json& obj, const char* key, std::string fallback,
                        std::string_view where) {
  const Json& v = Member(obj, key);
  if (v.is_null()) return fallback;
  if (!v.is_string()) Fail("convert-tokenizer: ", where, ".", key, " is not a string");
  return v.get<std::string>();
}
bool BoolField(const Json& obj, const char* key, bool fallback, std::string_view where) {
  const Json& v = Member(obj, key);
  if (v.is_null()) return fallback;
  if (!v.is_boolean()) Fail("convert-tokenizer: ", where, ".", key, " is not true or false");
  return v.get<bool>();
}

// The largest token id accepted: the largest vocabularies grove runs have 262144 tokens (Gemma 3).
// Far larger ids are a damaged file; they would make the converter allocate a token per id.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

// A token id: an integer in [0, kMaxTokenId] (a float, a string or a number out of range is
// refused naming `where`; converting an out-of-range float to an integer is undefined).
int64_t TokenId(const Json& v, std::string_view where) {
  const bool in_range = (v.is_number_unsigned() && v.get<uint64_t>() <= kMaxTokenId) ||
                        (v.is_number_integer() && !v.is_number_unsigned() &&
                         v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTokenId);
  if (!in_range) {
    Fail("convert-tokenizer: ", where, " is not a token id (an integer from 0 to ", kMaxTokenId,
         "): ", v.dump().substr(0, 40));
  }
  return v.get<int64_t>();
}

// Hugging Face's split patterns (tokenizer.json) by the llama.cpp pre-tokenizer that implements
// them. Facts about the published files; llama.cpp itself recognises a vocabulary by hashing the
// tokens of a test text, which needs the Python tokenizer, so grove matches the pattern instead.
struct KnownSplit {
  std::vector<std::string> signature;  // the pre-tokenizer's parts, see Signature()
  std::string_view pre;
};

const std::vector<KnownSplit>& KnownSplits() {
  static const std::vector<KnownSplit> known = {
      {{R"(split:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       "llama-bpe"},
      {{R"(split:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       "qwen2"},
      {{R"(split:[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       "tekken"},
      {{R"(split:[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       "gpt-4o"},
      {{R"(split:\p{N}{1,3})", "split:[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "split:[!\"#$%&'()*+,\\-./"
        ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
        "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
       "deepseek-v3"},
      {{"bytelevel-regex"}, "gpt-2"},
      {{"digits", "bytelevel-regex"}, "smollm"},
  };
  return known;
}

// The parts of a pre_tokenizer that decide how text splits: "split:<regex>" per Split, "digits"
// for individual digits, "bytelevel-regex" for a ByteLevel that applies GPT-2's own pattern. A
// ByteLevel without its regex only maps bytes, so it adds nothing.
void AddSignature(const Json& pre, std::vector<std::string>* parts) {
  if (!pre.is_object()) return;
  constexpr std::string_view kWhere = "tokenizer.json pre_tokenizer";
  const std::string type = StringField(pre, "type", "", kWhere);
  if (type == "Sequence") {
    const Json& list = Member(pre, "pretokenizers");
    if (list.is_array()) {
      for (const Json& p : list) AddSignature(p, parts);
    }
  } else if (type == "Split") {
    const Json& pattern = Member(pre, "pattern");
    if (!Member(pattern, "Regex").is_null()) {
      parts->push_back("split:" + StringField(pattern, "Regex", "", kWhere));
    }
    if (!Member(pattern, "String").is_null()) {
      parts->push_back("split-string:" + StringField(pattern, "String", "", kWhere));
    }
  } else if (type == "Digits") {
    parts->push_back(BoolField(pre, "individual_digits", false, kWhere) ? "digits" : "digits-runs");
  } else if (type == "ByteLevel") {
    if (BoolField(pre, "use_regex", true, kWhere)) parts->push_back("bytelevel-regex");
  } else {
    parts->push_back("other:" + type);
  }
}

std::string PreTokenizerNameFor(const Json& pre) {
  std::vector<std::string> parts;
  AddSignature(pre, &parts);
  for (const KnownSplit& k : KnownSplits()) {
    if (k.signature == parts) return std::string(k.pre);
  }
  return "";
}

bool MentionsByteLevel(const Json& j) {
  if (j.is_object()) {
    if (Member(j, "type") == "ByteLevel") return true;
    for (const auto& [key, value] : j.items()) {
      if (MentionsByteLevel(value)) return true;
    }
  } else if (j.is_array()) {
    for (const Json& v : j) {
      if (MentionsByteLevel(v)) return true;
    }
  }
  return false;
}

// A special token in tokenizer_config.json: "text", {"content": "text", ...} or null.
std::optional<std::string> TokenField(const Json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const Json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

// llama.cpp's converter treats added tokens that look like control markers as control tokens even
// when tokenizer.json does not mark them special.
bool LooksLikeControl(std::string_view t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() > open.size() + close.size() && t.substr(0, open.size()) == open &&
           t.substr(t.size() - close.size()) == close;
  };
  return wrapped("<|", "|>") || wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || t == "<pad>" ||
         t == "<mask>";
}

bool IsByteToken(std::string_view t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

std::string MergeText(const Json& merge, std::size_t rank) {
  if (merge.is_string()) return merge.get<std::string>();
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  }
  Fail("convert-tokenizer: tokenizer.json model.merges[", rank,
       "] is neither \"left right\" nor [left, right]");
}

// tokenizer.json's model, checked to be BPE with a vocab object.
const Json& BpeModel(const Json& tok) {
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object()) {
    Fail("convert-tokenizer: tokenizer.json has no 'model' object");
  }
  const Json& model = tok["model"];
  const std::string type = StringField(model, "type", "BPE", "tokenizer.json model");
  if (type != "BPE") {
    Fail("convert-tokenizer: tokenizer.json model.type = '", type,
         "' is not supported (grove converts BPE tokenizers: byte-level, and SentencePiece-style "
         "with byte fallback)");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    Fail("convert-tokenizer: tokenizer.json has no model.vocab object");
  }
  return model;
}

// The tokens by id as tokenizer.json lists them: the model's vocab, then the added tokens (which
// may reuse or extend the ids), with whether each added one is marked special.
struct ListedTokens {
  std::map<int64_t, std::string> by_id;
  std::unordered_map<int64_t, bool> added_special;  // id -> special
};

ListedTokens ReadListedTokens(const Json& tok, const Json& model) {
  ListedTokens listed;
  for (const auto& [text, id] : model["vocab"].items()) {
    listed.by_id[TokenId(id, "tokenizer.json model.vocab['" + text + "']")] = text;
  }
  const Json& added_tokens = Member(tok, "added_tokens");
  if (!added_tokens.is_null() && !added_tokens.is_array())
    Fail("convert-tokenizer: tokenizer.json added_tokens is not a list");
  for (const Json& added : added_tokens) {
    if (!added.is_object() || !added.contains("id") || !added.contains("content") ||
        !added["content"].is_string()) {
      Fail("convert-tokenizer: an added_tokens entry without an id or content");
    }
    const int64_t id = TokenId(added["id"], "tokenizer.json added_tokens[].id");
    listed.by_id[id] = added["content"].get<std::string>();
    listed.added_special[id] = BoolField(added, "special", false, "tokenizer.json added_tokens[]");
  }
  if (listed.by_id.empty()) Fail("convert-tokenizer: tokenizer.json has no tokens");
  return listed;
}

// Every id from 0 to the largest, with its text and type, as the GGUF lists them.
struct TokenTable {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::unordered_map<std::string, int32_t> ids;
};

// The type of a listed token (see the header).
TokenType TypeOf(const ListedTokens& listed, int64_t id, const std::string& text, bool byte_level,
                 bool byte_fallback, const std::optional<std::string>& unk,
                 const std::string& model_unk) {
  TokenType t = TokenType::kNormal;
  if (auto a = listed.added_special.find(id); a != listed.added_special.end()) {
    if (a->second || LooksLikeControl(text)) {
      t = TokenType::kControl;
    } else if (byte_level || text.find(kSpaceMarker) == std::string::npos) {
      t = TokenType::kUserDefined;
    }
    // Otherwise a SentencePiece piece spelled with U+2581 (Gemma lists its whitespace runs
    // among the added tokens): added tokens are matched in the raw text, where spaces are not
    // yet U+2581, so it can never match there; the merges make it, and it decodes to spaces
    // like any normal piece.
  } else if (byte_fallback && IsByteToken(text)) {
    t = TokenType::kByte;
  }
  if ((unk && *unk == text) || (!model_unk.empty() && model_unk == text)) t = TokenType::kUnknown;
  return t;
}

TokenTable BuildTokenTable(const ListedTokens& listed, const Json& model, const Json& config,
                           bool byte_level, bool byte_fallback) {
  const int64_t n_tokens = listed.by_id.rbegin()->first + 1;
  // Ids no token uses become padding; a few are normal (vocabularies rounded up), a majority is
  // a damaged file, which would otherwise make millions of padding tokens.
  if (n_tokens > 2 * static_cast<int64_t>(listed.by_id.size()) + 1024) {
    Fail("convert-tokenizer: token ids reach ", n_tokens - 1, " but tokenizer.json has ",
         listed.by_id.size(), " tokens: most ids would be unused");
  }
  TokenTable table;
  table.tokens.resize(n_tokens);
  table.types.assign(n_tokens, static_cast<int32_t>(TokenType::kNormal));
  const std::optional<std::string> unk = TokenField(config, "unk_token");
  const std::string model_unk = StringField(model, "unk_token", "", "tokenizer.json model");
  for (int64_t id = 0; id < n_tokens; ++id) {
    auto it = listed.by_id.find(id);
    if (it == listed.by_id.end()) {
      table.tokens[id] = "[PAD" + std::to_string(id) + "]";
      table.types[id] = static_cast<int32_t>(TokenType::kUnused);
      continue;
    }
    table.tokens[id] = it->second;
    table.ids.emplace(it->second, static_cast<int32_t>(id));
    table.types[id] = static_cast<int32_t>(
        TypeOf(listed, id, it->second, byte_level, byte_fallback, unk, model_unk));
  }
  return table;
}

// general.* and placeholder hyperparameters: llama.cpp reads them even from a vocabulary-only file.
void WritePlaceholderModel(const HfTokenizerOptions& options, GgufWriter* writer) {
  writer->SetString("general.architecture", "llama");
  if (!options.name.empty()) writer->SetString("general.name", options.name);
  writer->SetUint32("llama.context_length", 4096);
  writer->SetUint32("llama.embedding_length", 64);
  writer->SetUint32("llama.feed_forward_length", 128);
  writer->SetUint32("llama.block_count", 1);
  writer->SetUint32("llama.attention.head_count", 1);
  writer->SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
}

// A byte-level vocabulary's pre-tokenizer name and merges.
void WriteByteLevelMerges(const Json& pre_tokenizer, const Json& merges,
                          const HfTokenizerOptions& options, HfTokenizerSummary& summary,
                          GgufWriter* writer) {
  summary.pre = options.pre.empty() ? PreTokenizerNameFor(pre_tokenizer) : options.pre;
  if (summary.pre.empty()) {
    Fail("convert-tokenizer: the pre_tokenizer of tokenizer.json is not one grove knows (",
         pre_tokenizer.dump().substr(0, 200),
         "...); name the llama.cpp pre-tokenizer it implements with --pre");
  }
  PreTokenizer::ForName(summary.pre);  // throws, listing the names, when unknown
  writer->SetString("tokenizer.ggml.pre", summary.pre);
  std::vector<std::string> merge_texts;
  merge_texts.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) merge_texts.push_back(MergeText(merges[i], i));
  writer->SetStringArray("tokenizer.ggml.merges", std::move(merge_texts));
}

// A SentencePiece-style vocabulary's scores: minus the rank of the first merge that makes the
// token (see the header); and its space prefix.
void WriteSentencePieceScores(const Json& tok, const Json& merges, const TokenTable& table,
                              GgufWriter* writer) {
  const int64_t n_tokens = static_cast<int64_t>(table.tokens.size());
  std::vector<float> scores(n_tokens, -1e9f);
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    std::string merged = MergeText(merges[rank], rank);
    const std::size_t space = merged.find(' ', 1);
    if (space == std::string::npos) {
      Fail("convert-tokenizer: tokenizer.json model.merges[", rank, "] has no space");
    }
    merged.erase(space, 1);
    auto it = table.ids.find(merged);
    if (it != table.ids.end() && scores[it->second] == -1e9f) {
      scores[it->second] = -static_cast<float>(rank);
    }
  }
  for (int64_t id = 0; id < n_tokens; ++id) {
    if (table.tokens[id].size() <= 3 && scores[id] == -1e9f) scores[id] = 0.0f;  // characters
  }
  writer->SetFloat32Array("tokenizer.ggml.scores", scores);
  // A normalizer or pre-tokenizer that prepends U+2581 is sentencepiece's space prefix.
  const std::string normalizer = Member(tok, "normalizer").dump();
  const std::string pre = Member(tok, "pre_tokenizer").dump();
  const bool prefix = normalizer.find("Prepend") != std::string::npos ||
                      pre.find("\"prepend_scheme\":\"always\"") != std::string::npos ||
                      pre.find("\"prepend_scheme\":\"first\"") != std::string::npos ||
                      pre.find("\"add_prefix_space\":true") != std::string::npos;
  writer->SetBool("tokenizer.ggml.add_space_prefix", prefix);
}

// tokenizer_config.json's chat_template: a string, or the list form's "default"; empty if none.
std::string ChatTemplateText(const Json& config) {
  if (!config.contains("chat_template")) return "";
  const Json& t = config["chat_template"];
  std::string text;
  if (t.is_string()) {
    text = t.get<std::string>();
  } else if (t.is_array()) {
    for (const Json& named : t) {
      constexpr std::string_view kWhere = "tokenizer_config.json chat_template[]";
      if (StringField(named, "name", "", kWhere) == "default") {
        text = StringField(named, "template", "", kWhere);
      }
    }
  }
  return text;
}

// What tokenizer_config.json adds: the special tokens' ids, add_bos/add_eos and the template.
void WriteConfig(const Json& config, const TokenTable& table, HfTokenizerSummary& summary,
                 GgufWriter* writer) {
  auto set_special = [&](const char* config_key, const char* gguf_key) {
    const std::optional<std::string> text = TokenField(config, config_key);
    if (!text) return;
    auto it = table.ids.find(*text);
    if (it == table.ids.end()) {
      summary.notes.push_back(std::string(config_key) + " '" + *text +
                              "' is not a token: left out");
      return;
    }
    writer->SetUint32(gguf_key, static_cast<uint32_t>(it->second));
  };
  set_special("bos_token", "tokenizer.ggml.bos_token_id");
  set_special("eos_token", "tokenizer.ggml.eos_token_id");
  set_special("unk_token", "tokenizer.ggml.unknown_token_id");
  set_special("pad_token", "tokenizer.ggml.padding_token_id");
  for (const char* key : {"add_bos_token", "add_eos_token"}) {
    if (config.contains(key) && config[key].is_boolean()) {
      writer->SetBool(StrCat("tokenizer.ggml.", key), config[key].get<bool>());
    }
  }
  const std::string chat_template = ChatTemplateText(config);
  if (!chat_template.empty()) {
    writer->SetString("tokenizer.chat_template", chat_template);
    summary.has_chat_template = true;
  }
}

HfTokenizerSummary Convert(std::string_view tokenizer_json, std::string_view config_json,
                           const HfTokenizerOptions& options, GgufWriter* writer) {
  const Json tok = ParseJson(tokenizer_json, "tokenizer.json");
  const Json config =
      config_json.empty() ? Json::object() : ParseJson(config_json, "tokenizer_config.json");
  const Json& model = BpeModel(tok);
  const Json& pre_tokenizer = Member(tok, "pre_tokenizer");
  const bool byte_level =
      MentionsByteLevel(pre_tokenizer) || MentionsByteLevel(Member(tok, "decoder"));
  const bool byte_fallback = BoolField(model, "byte_fallback", false, "tokenizer.json model");
  if (!byte_level && !byte_fallback) {
    Fail(
        "convert-tokenizer: tokenizer.json is BPE but neither byte-level (no ByteLevel "
        "pre-tokenizer or decoder) nor SentencePiece-style (model.byte_fallback is not true)");
  }
  const ListedTokens listed = ReadListedTokens(tok, model);
  TokenTable table = BuildTokenTable(listed, model, config, byte_level, byte_fallback);
  const Json& merges = Member(model, "merges");  // null (absent) has size 0
  if (!merges.is_null() && !merges.is_array())
    Fail("convert-tokenizer: tokenizer.json model.merges is not a list");

  HfTokenizerSummary summary;
  summary.model = byte_level ? "gpt2" : "llama";
  summary.n_tokens = static_cast<int32_t>(table.tokens.size());
  summary.n_added = static_cast<int32_t>(listed.added_special.size());
  summary.n_merges = static_cast<int32_t>(merges.size());
  WritePlaceholderModel(options, writer);
  writer->SetString("tokenizer.ggml.model", summary.model);
  if (byte_level) {
    WriteByteLevelMerges(pre_tokenizer, merges, options, summary, writer);
  } else {
    WriteSentencePieceScores(tok, merges, table, writer);
  }
  writer->SetStringArray("tokenizer.ggml.tokens", std::move(table.tokens));
  writer->SetInt32Array("tokenizer.ggml.token_type", table.types);
  const std::string normalizer_type =
      StringField(Member(tok, "normalizer"), "type", "", "tokenizer.json normalizer");
  if (normalizer_type == "NFC" || normalizer_type == "NFKC") {
    summary.notes.push_back(
        "the " + normalizer_type +
        " normalizer of tokenizer.json is not applied (nor is it by llama.cpp)");
  }
  WriteConfig(config, table, summary, writer);
  return summary;
}

}  // namespace

HfTokenizerSummary ConvertHfTokenizer(std::string_view tokenizer_json, std::string_view config_json,
                                      const HfTokenizerOptions& options, GgufWriter* writer) {
  try {
    return Convert(tokenizer_json, config_json, options, writer);
  } catch (const Json::exception& e) {
    // A field of a type the checks above did not expect: still a refusal, never a crash.
    Fail(
        "convert-tokenizer: tokenizer.json or tokenizer_config.json holds a value of an unexpected "
        "type (",
        e.what(), ")");
  }
}

}  // namespace grove
