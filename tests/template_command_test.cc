// grove template end to end: a vocabulary-only GGUF carrying a chat template, a conversation file,
// and the exact text printed; a file without a template falls back to the plain format.
#include <gtest/gtest.h>

#include <fstream>

#include "grove_cli.h"
#include "io/gguf_writer.h"
#include "test_support.h"

namespace grove {
namespace {

using testing::CommandResult;

CommandResult Grove(const std::string& args) {
  return testing::RunShellCommand(std::string(kGroveCli) + " " + args,
                                  testing::TempPath("template_out.txt"),
                                  testing::TempPath("template_err.txt"));
}

// A SentencePiece vocabulary of a few tokens, BOS "<s>" and EOS "</s>", and optionally a template.
std::string WriteVocab(const std::string& name, const std::string& chat_template) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("tokenizer.ggml.model", "llama");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b"};
  std::vector<float> scores(tokens.size(), 0.0f);
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1};
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", scores);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
  if (!chat_template.empty()) w.SetString("tokenizer.chat_template", chat_template);
  const std::string path = testing::TempPath(name);
  w.WriteFile(path);
  return path;
}

std::string WriteText(const std::string& name, const std::string& text) {
  const std::string path = testing::TempPath(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

constexpr const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content | trim }}{{ eos_token "
    "}}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

TEST(TemplateCommand, PrintsExactlyTheRenderedPrompt) {
  const std::string vocab = WriteVocab("vocab-template.gguf", kTemplate);
  const std::string conv = WriteText(
      "conv.json",
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "}])");
  CommandResult r = Grove("template -m " + vocab + " --messages " + conv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s><|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
  r = Grove("template -m " + vocab + " --messages " + conv +
            " --no-generation-prompt --system 'Be kind.'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s><|system|>\nBe kind.</s>\n<|user|>\nHi</s>\n");
}

TEST(TemplateCommand, FallsBackWithoutATemplate) {
  const std::string vocab = WriteVocab("vocab-plain.gguf", "");
  const std::string conv = WriteText("conv-plain.json", R"([{"role": "user", "content": "Hi"}])");
  CommandResult r = Grove("template -m " + vocab + " --messages " + conv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "User: Hi\nAssistant:");
  EXPECT_NE(r.err.find("no tokenizer.chat_template"), std::string::npos) << r.err;
}

TEST(TemplateCommand, BadInputIsAClearError) {
  const std::string vocab = WriteVocab("vocab-bad.gguf", kTemplate);
  const std::string unknown_role =
      WriteText("conv-role.json", R"([{"role": "robot", "content": "Hi"}])");
  CommandResult r = Grove("template -m " + vocab + " --messages " + unknown_role);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown role 'robot'"), std::string::npos) << r.err;

  const std::string raising = WriteVocab(
      "vocab-raise.gguf",
      "{% if messages[0].role != 'system' %}{{ raise_exception('need a system') }}{% endif %}");
  const std::string conv = WriteText("conv-user.json", R"([{"role": "user", "content": "Hi"}])");
  r = Grove("template -m " + raising + " --messages " + conv);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("need a system"), std::string::npos) << r.err;

  const std::string looping = WriteVocab(
      "vocab-loop.gguf",
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  r = Grove("template -m " + looping + " --messages " + conv);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("steps"), std::string::npos) << r.err;

  const std::string bad_utf8 =
      WriteText("conv-utf8.json", "[{\"role\": \"user\", \"content\": \"\xff\"}]");
  r = Grove("template -m " + vocab + " --messages " + bad_utf8);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.err.empty());
}

}  // namespace
}  // namespace grove
