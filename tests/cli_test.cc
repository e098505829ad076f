// End-to-end tests of the grove binary: exit codes, --help, the JSON of `grove bench` and its
// hardware profile, and `grove quantize` round trips. Tiny models only, so the suite stays fast; no
// test looks at how fast anything is (timings never gate a test), only that figures are present
// and positive.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/device.h"
#include "grove_cli.h"
#include "io/gguf.h"
#include "test_support.h"

namespace grove {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

using testing::CommandResult;
using testing::ReadWholeFile;

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::TempDirectory("cli_test"));
    for (const char* type : {"f32", "q8_0"}) {
      const CommandResult r =
          Grove(std::string("synth --shape tiny --type ") + type + " -o " + Model(type));
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string Path(const std::string& name) { return (*dir_ / name).string(); }
  static std::string Model(const std::string& type) { return Path("tiny-" + type + ".gguf"); }

  // Runs `grove ARGS` with stdout and stderr captured in files of the temporary directory.
  static CommandResult Grove(const std::string& args) { return Shell(kGroveCli, args); }
  // The same with a command before grove's path (such as `timeout 5`).
  static CommandResult Shell(const std::string& prefix, const std::string& args) {
    return testing::RunShellCommand(prefix + " " + args, Path("stdout.txt"), Path("stderr.txt"));
  }

  static fs::path* dir_;
};

fs::path* CliTest::dir_ = nullptr;

TEST_F(CliTest, HelpOfEveryCommandExitsZero) {
  for (const char* cmd :
       {"",          "run",  "info",     "tokenize",         "synth", "bench",  "quantize", "slice",
        "calibrate", "tree", "corpus",   "tokenizer-train",  "train", "export", "eval",     "tot",
        "tot-bench", "chat", "template", "convert-tokenizer"}) {
    const CommandResult r = Grove(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd << ": " << r.out;
  }
}

// grove chat reads turns from stdin: each answer streams, then one line of τ, speed and speedup;
// /clear forgets the conversation, end of input ends the program.
TEST_F(CliTest, ChatAnswersEachTurnAndReportsSpeculation) {
  const std::string turns = Path("turns.txt");
  std::ofstream(turns) << "Hello there\n/clear\n\nOnce upon a time\n";
  const CommandResult r =
      Grove("chat -m " + Model("q8_0") + " --draft " + Model("q8_0") +
            " --spec chain:3 -n 6 --temp 0 -t 1 --system 'Be brief.' < " + turns);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[conversation cleared]"), std::string::npos) << r.out;
  std::size_t answers = 0;
  for (std::size_t at = r.err.find("x plain"); at != std::string::npos;
       at = r.err.find("x plain", at + 1)) {
    ++answers;
  }
  EXPECT_EQ(answers, 2u) << r.err;  // the empty line is not a turn
  EXPECT_NE(r.err.find("τ "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tokens after the answer)"), std::string::npos) << r.err;
}

// Each turn keeps what the caches hold of the conversation and prefills the rest: the answers
// are those of prefilling the whole conversation every turn (--no-cache-prompt). The second turn
// keeps at least the first prompt; the third also the second answer (the bundled base pair's
// first answer begins with ",", which the plain format renders after "Assistant: ", so the tokens
// part there; its second answer begins with the space the format writes).
TEST_F(CliTest, ChatKeepsTheConversationsCacheAndAnswersAsWithout) {
  const std::string turns = Path("reuse-turns.txt");
  std::ofstream(turns) << "Once upon a time\nThe little dog\nThen the sun\n";
  const std::string chat = "chat --temp 0 -t 1 --spec chain:3 -n 24 ";
  const CommandResult warm = Grove(chat + "< " + turns);
  const CommandResult cold = Grove(chat + "--no-cache-prompt < " + turns);
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  ASSERT_EQ(cold.exit_code, 0) << cold.err;
  EXPECT_EQ(warm.out, cold.out);
  // (prompt tokens, cached tokens) of each turn's line: "prompt N tokens, M cached |".
  auto turns_of = [](const std::string& err) {
    std::vector<std::pair<long, long>> v;
    for (std::size_t at = err.find("| prompt "); at != std::string::npos;
         at = err.find("| prompt ", at + 1)) {
      const std::size_t n = at + std::strlen("| prompt ");
      const std::size_t comma = err.find(" tokens, ", n);
      v.emplace_back(std::stol(err.substr(n, comma - n)),
                     std::stol(err.substr(comma + std::strlen(" tokens, "))));
    }
    return v;
  };
  const std::vector<std::pair<long, long>> w = turns_of(warm.err), c = turns_of(cold.err);
  ASSERT_EQ(w.size(), 3u) << warm.err;
  ASSERT_EQ(c.size(), 3u) << cold.err;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c[i].second, 0) << cold.err;
    EXPECT_EQ(w[i].first, c[i].first) << warm.err;  // the same prompts
  }
  EXPECT_EQ(w[0].second, 0) << warm.err;
  EXPECT_GE(w[1].second, w[0].first) << warm.err;
  EXPECT_GT(w[2].second, w[1].first) << warm.err;
  EXPECT_LT(w[2].second, w[2].first) << warm.err;
}

// The bundled pair's context is 512 tokens, as is chat's default -n: every message was refused
// ("raise -c", which cannot go past 512). The answer is capped at what the context has left.
TEST_F(CliTest, ChatWithTheBundledPairAnswersAtItsDefaultLength) {
  const std::string turns = Path("bundled-turns.txt");
  std::ofstream(turns) << "Once upon a time\n";
  const CommandResult r = Grove("chat --temp 0 -t 1 --spec chain:2 < " + turns);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("no room"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("x plain"), std::string::npos) << r.err;
  EXPECT_GT(r.out.size(), std::string("> > ").size() + 20) << r.out;
}

TEST_F(CliTest, BenchJsonHasEveryFigure) {
  const CommandResult r =
      Grove("bench -m " + Model("q8_0") + " -p 16 -n 4 -r 2 -t 1 -o json --probe-mib 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json doc = Json::parse(r.out);  // throws, failing the test, on invalid JSON
  EXPECT_FALSE(doc.at("kernels").get<std::string>().empty());
  EXPECT_TRUE(doc.contains("cpu_features"));
  ASSERT_EQ(doc.at("bandwidth_probes").size(), 1u);
  EXPECT_GT(doc["bandwidth_probes"][0].at("gbps_median").get<double>(), 0);
  EXPECT_EQ(doc["bandwidth_probes"][0].at("threads").get<int>(), 1);
  ASSERT_EQ(doc.at("runs").size(), 1u);
  const Json& run = doc["runs"][0];
  EXPECT_EQ(run.at("model").get<std::string>(), "tiny-q8_0.gguf");
  EXPECT_EQ(run.at("model_types").get<std::string>(), "q8_0");
  EXPECT_GT(run.at("model_size_bytes").get<uint64_t>(), 0u);
  EXPECT_GT(run.at("model_params").get<uint64_t>(), 0u);
  EXPECT_GT(run.at("weight_bytes").get<uint64_t>(), 0u);
  EXPECT_EQ(run.at("threads").get<int>(), 1);
  EXPECT_GT(run.at("memory_after_load").at("rss_bytes").get<uint64_t>(), 0u);
  EXPECT_GT(run.at("memory_after_runs").at("peak_bytes").get<uint64_t>(), 0u);
  ASSERT_EQ(run.at("tests").size(), 2u);
  EXPECT_EQ(run["tests"][0].at("test").get<std::string>(), "pp16");
  EXPECT_EQ(run["tests"][1].at("test").get<std::string>(), "tg4");
  for (const Json& t : run["tests"]) {
    EXPECT_EQ(t.at("samples_ns").size(), 2u);
    EXPECT_GT(t.at("avg_ts").get<double>(), 0);
    EXPECT_GE(t.at("stddev_ts").get<double>(), 0);
    EXPECT_GT(t.at("avg_gbps").get<double>(), 0);
    EXPECT_GT(t.at("probe_fraction").get<double>(), 0);
  }
  EXPECT_FALSE(run.contains("verify_curve"));
}

TEST_F(CliTest, BenchMarkdownTableAndVerifyCurveProfile) {
  const std::string profile = Path("profile.json");
  const CommandResult r =
      Grove("bench -m " + Model("q8_0") +
            " -p 8 -n 2 -r 2 -t 1 --probe-mib 8 --verify-curve 4,2,1 --profile-out " + profile);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kernels: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("read bandwidth probe, 1 thread:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| model | size | params | type | threads | test | t/s | GB/s |"),
            std::string::npos);
  EXPECT_NE(r.out.find("| tiny-q8_0.gguf |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| pp8 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg2 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memory: tiny-q8_0.gguf"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verify curve"), std::string::npos) << r.out;

  const Json p = Json::parse(ReadWholeFile(profile));
  EXPECT_EQ(p.at("format").get<std::string>(), "grove-hardware-profile");
  EXPECT_EQ(p.at("version").get<int>(), 1);
  EXPECT_EQ(p.at("model").get<std::string>(), "tiny-q8_0.gguf");
  EXPECT_EQ(p.at("threads").get<int>(), 1);
  EXPECT_FALSE(p.at("kernels").get<std::string>().empty());
  EXPECT_GT(p.at("bandwidth_gbps").get<double>(), 0);
  EXPECT_GT(p.at("weight_bytes").get<uint64_t>(), 0u);
  const Json& curve = p.at("curve");
  ASSERT_EQ(curve.size(), 3u);
  const int expected_n[] = {1, 2, 4};
  for (std::size_t i = 0; i < curve.size(); ++i) {
    EXPECT_EQ(curve[i].at("n").get<int>(), expected_n[i]);
    EXPECT_GT(curve[i].at("seconds_median").get<double>(), 0);
    EXPECT_GE(curve[i].at("seconds_sd").get<double>(), 0);
    EXPECT_GT(curve[i].at("ratio").get<double>(), 0);
  }
  EXPECT_EQ(curve[0].at("ratio").get<double>(), 1.0);
  EXPECT_FALSE(testing::PartialFileLeft(profile));
}

TEST_F(CliTest, VerifyCurveAlwaysMeasuresOneToken) {
  const std::string profile = Path("profile2.json");
  const CommandResult r =
      Grove("bench -m " + Model("q8_0") +
            " -p 0 -n 0 -r 1 -t 1 --probe-mib 0 --verify-curve 3 --profile-out " + profile);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json p = Json::parse(ReadWholeFile(profile));
  ASSERT_EQ(p.at("curve").size(), 2u);
  EXPECT_EQ(p["curve"][0].at("n").get<int>(), 1);
  EXPECT_EQ(p["curve"][1].at("n").get<int>(), 3);
  EXPECT_TRUE(p.at("bandwidth_gbps").is_null());  // probe skipped
}

// grove's q8_0 quantizer is the one `grove synth` uses, so quantizing the f32 model must give the
// synthesised q8_0 model's tensors byte for byte, and both must generate the same greedy text.
TEST_F(CliTest, QuantizeF32ToQ8_0MatchesSynthAndRuns) {
  const std::string out = Path("quantized-q8_0.gguf");
  const CommandResult q = Grove("quantize " + Model("f32") + " " + out + " q8_0 -t 2");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_FALSE(testing::PartialFileLeft(out));

  auto quantized = GgufFile::Open(out);
  auto reference = GgufFile::Open(Model("q8_0"));
  EXPECT_EQ(quantized->GetUint("general.file_type"), 7u);  // LLAMA_FTYPE_MOSTLY_Q8_0
  EXPECT_EQ(quantized->GetUint("general.quantization_version"), 2u);
  EXPECT_EQ(quantized->GetString("general.architecture"), "llama");
  ASSERT_EQ(quantized->tensors().size(), reference->tensors().size());
  for (const GgufTensor& t : quantized->tensors()) {
    EXPECT_EQ(t.type, t.shape.size() >= 2 ? GgmlType::kQ8_0 : GgmlType::kF32) << t.name;
    const GgufTensor& ref = reference->GetTensor(t.name);
    ASSERT_EQ(t.n_bytes, ref.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, ref.data, t.n_bytes), 0) << t.name;
  }

  const CommandResult a = Grove("run -m " + out + " -p hello -n 4 --temp 0 -t 1");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const CommandResult b = Grove("run -m " + Model("q8_0") + " -p hello -n 4 --temp 0 -t 1");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

// The tiny model's rows (64, 160) do not divide into 256-element K blocks: every matrix falls back,
// as in llama.cpp, q4_K to q5_0 and q6_K to q8_0, with a warning naming it, and the result still
// loads and runs.
TEST_F(CliTest, QuantizeFallsBackWhenRowsDoNotFitTheBlocks) {
  const std::string out = Path("fallback.gguf");
  const CommandResult q = Grove("quantize " + Model("f32") + " " + out + " q4_k_m");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.err.find("tensor 'blk.0.attn_q.weight': rows of 64 are not a multiple"),
            std::string::npos)
      << q.err;
  auto f = GgufFile::Open(out);
  EXPECT_EQ(f->GetUint("general.file_type"), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(f->GetTensor("blk.0.attn_q.weight").type, GgmlType::kQ5_0);
  int q8_0 = 0;  // the matrices the mix gives q6_K
  for (const GgufTensor& t : f->tensors()) {
    if (t.shape.size() < 2) continue;
    EXPECT_TRUE(t.type == GgmlType::kQ5_0 || t.type == GgmlType::kQ8_0) << t.name;
    q8_0 += t.type == GgmlType::kQ8_0;
  }
  EXPECT_GT(q8_0, 0);
  EXPECT_EQ(f->GetTensor("blk.0.attn_norm.weight").type, GgmlType::kF32);
  const CommandResult r = Grove("run -m " + out + " -p hello -n 2 --temp 0 -t 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // IQ4_XS falls back to IQ4_NL (32-element blocks), as llama.cpp's tensor_type_fallback does.
  const std::string iq4 = Path("fallback-iq4.gguf");
  const CommandResult q2 = Grove("quantize " + Model("f32") + " " + iq4 + " iq4_xs");
  ASSERT_EQ(q2.exit_code, 0) << q2.err;
  auto g = GgufFile::Open(iq4);
  EXPECT_EQ(g->GetUint("general.file_type"), 30u);  // LLAMA_FTYPE_MOSTLY_IQ4_XS
  EXPECT_EQ(g->GetTensor("blk.0.attn_q.weight").type, GgmlType::kIQ4_NL);
  EXPECT_EQ(g->GetTensor("output.weight").type, GgmlType::kQ8_0);  // q6_K's fallback
  EXPECT_EQ(Grove("run -m " + iq4 + " -p hello -n 2 --temp 0 -t 1").exit_code, 0);
}

// The speculative path of the CLI: slice a draft, calibrate, print a tree, run with --compare, and
// bench --spec with its greedy-identity check.
TEST_F(CliTest, SpeculativeCommandsEndToEnd) {
  const std::string draft = Path("draft.gguf");
  ASSERT_EQ(Grove("slice -m " + Model("f32") + " --layers 1 -o " + draft).exit_code, 0);
  std::ofstream(Path("prompts.txt")) << "hello world\n\nabc abc abc\nsecond line\n";
  const std::string accept = Path("accept.json");
  CommandResult r = Grove("calibrate -m " + Model("f32") + " --draft " + draft + " --prompts " +
                          Path("prompts.txt") + " --width 4 -n 8 -t 1 -o " + accept);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json a = Json::parse(ReadWholeFile(accept));
  ASSERT_EQ(a["acceptance"].size(), 4u);
  double total = a["none"].get<double>();
  for (const auto& p : a["acceptance"]) total += p.get<double>();
  EXPECT_NEAR(total, 1.0, 1e-9) << "each step accepts one child or none";
  EXPECT_EQ(a["prompts"].get<int>(), 2);

  r = Grove("tree --accept " + accept + " --budget 6 -o " + Path("tree.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("G = "), std::string::npos) << r.out;
  EXPECT_TRUE(Json::parse(ReadWholeFile(Path("tree.json"))).contains("parents"));

  r = Grove("run -m " + Model("f32") + " --draft " + draft + " --spec file:" + Path("tree.json") +
            " -p hello -n 12 --temp 0 -t 1 --ignore-eos --compare");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("τ = "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("outputs identical"), std::string::npos) << r.err;

  // The default plan with a draft is auto; the stats name the step's time split.
  r = Grove("run -m " + Model("f32") + " --draft " + draft +
            " -p hello -n 12 --temp 0 -t 1 --ignore-eos --compare");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("speculative: auto"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("draft fwd"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("verify fwd"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("outputs identical"), std::string::npos) << r.err;

  // Two drafters in one run: each with every plan, against one plain baseline.
  r = Grove("bench -m " + Model("q8_0") + " --draft ngram --draft " + draft +
            " --spec chain:3 --spec kconfig:2,2 --spec auto -r 1 -t 1 "
            "--spec-tokens 8 -o json --prompts " +
            Path("prompts.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json b = Json::parse(r.out);
  ASSERT_EQ(b["runs"].size(), 1u);
  ASSERT_EQ(b["runs"][0]["plans"].size(), 6u);
  EXPECT_EQ(b["runs"][0]["plans"][0]["draft"], "ngram");
  EXPECT_EQ(b["runs"][0]["plans"][3]["draft"], draft);
  EXPECT_EQ(b["runs"][0]["plans"][3]["drafter"], "draft-model");
  for (const auto& plan : b["runs"][0]["plans"]) {
    EXPECT_TRUE(plan["greedy_identical"].get<bool>());
    EXPECT_GE(plan["tau"].get<double>(), 1.0);
    EXPECT_GT(plan["tps_median"].get<double>(), 0.0);
    if (plan["spec"] == "chain:3" && plan["draft"] == draft) {  // ngram may find no match
      ASSERT_EQ(plan["acceptance_by_depth"].size(), 3u) << plan;
      for (const auto& a : plan["acceptance_by_depth"]) {
        EXPECT_GE(a.get<double>(), 0.0);
        EXPECT_LE(a.get<double>(), 1.0);
      }
    }
    const Json& split = plan["split"];
    const double parts =
        split["draft_forward_ms"].get<double>() + split["tree_building_ms"].get<double>() +
        split["verify_forward_ms"].get<double>() + split["verification_ms"].get<double>() +
        split["cache_ms"].get<double>() + split["other_ms"].get<double>();
    EXPECT_NEAR(parts, split["step_ms"].get<double>(),
                1e-6 * split["step_ms"].get<double>() + 1e-9);
  }

  // Bad speculative input: named errors, non-zero exit.
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"run -m " + Model("f32") + " --draft " + draft + " --spec tree:3",
            "unknown kind 'tree'"},
           {"run -m " + Model("f32") + " --draft " + draft + " --spec sequoia:8",
            "acceptance vector"},
           {"run -m " + Model("f32") + " --draft " + draft + " --verify medusa",
            "unknown verify rule"},
           {"run -m " + Model("f32") + " --draft " + draft +
                " --temp 0.8 --verify specinfer --draw deterministic",
            "specinfer"},
           {"run -m " + Model("f32") + " --spec chain:2", "--draft"},
           {"tree --accept " + Path("missing.json"), "missing.json"},
           {"slice -m " + Model("f32") + " --layers 9 -o " + Path("x.gguf"), "9 layers"},
       }) {
    r = Grove(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\n" << r.err;
  }
}

// corpus -> tokenizer -> train (with export) -> eval -> export -> run, the way models/ was made.
TEST_F(CliTest, TrainingCommandsEndToEnd) {
  const std::string corpus = Path("corpus"), run = Path("run");
  ASSERT_EQ(Grove("corpus --out " + corpus + " --tokens 20000").exit_code, 0);
  CommandResult r =
      Grove("tokenizer-train --corpus " + corpus + " --vocab 384 -o " + corpus + "/tok.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string train =
      "train --corpus " + corpus + " --tokenizer " + corpus + "/tok.gguf -o " + run +
      " --dim 32 --layers 1 --heads 2 --ffn 64 --ctx 64 --seq-len 32 --batch 4 --steps 20"
      " --warmup 2 --eval-every 10 -t 1 --export " +
      run + "/m.gguf";
  r = Grove(train);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("step 20/20"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("valid "), std::string::npos) << r.err;
  std::istringstream log(ReadWholeFile(run + "/log.tsv"));
  int lines = 0;
  for (std::string line; std::getline(log, line);) ++lines;
  EXPECT_EQ(lines, 21) << "a header and one line per step";
  // Running the finished run again resumes at its end and changes nothing.
  r = Grove(train);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resumed"), std::string::npos) << r.err;

  r = Grove("eval -m " + run + "/m.gguf --draft " + run + "/m.gguf --corpus " + corpus +
            " --windows 4 --seq-len 32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("greedy agreement with the model 1.0000"), std::string::npos) << r.out;
  // More windows than the text holds side by side: cut to what it holds, said, and finished
  // (10^9 windows used to run without bound and without a word).
  r = Grove("eval -m " + run + "/m.gguf --corpus " + corpus + " --windows 1000000000 --seq-len 32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("windows of 32 tokens; evaluating"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("evaluating: window"), std::string::npos) << r.err;
  r = Grove("export " + run + "/checkpoint.gguf -o " + run + "/m16.gguf --type f16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Grove("run -m " + run + "/m16.gguf -p Once -n 5 --temp 0 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // A parallel drafter for that model; `grove export` of its checkpoint writes a drafter (with its
  // masks and target), not a plain model, and it drafts for the model it was trained for.
  const std::string drun = Path("drafter-run");
  r = Grove("train-drafter --drafter parallel --masks 2 --target " + run + "/m.gguf --corpus " +
            corpus + " -o " + drun + " --steps 3 --batch 2 --seq-len 16 --warmup 1 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Grove("export " + drun + "/checkpoint.gguf -o " + drun + "/d.gguf --name tiny-parallel");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  {
    auto drafter = GgufFile::Open(drun + "/d.gguf");
    EXPECT_EQ(drafter->GetString("grove.drafter.kind"), "parallel");
    EXPECT_EQ(drafter->GetUint("grove.drafter.masks"), 2u);
    EXPECT_EQ(drafter->GetString("general.name"), "tiny-parallel");
  }
  r = Grove("run -m " + run + "/m.gguf --draft " + drun + "/d.gguf --spec chain:3 -p Once -n 8" +
            " --temp 0 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"train --corpus " + Path("nope") + " --tokenizer " + corpus + "/tok.gguf -o " +
                Path("r2"),
            "nope"},
           {"train --corpus " + corpus + " --tokenizer " + corpus + "/tok.gguf -o " + Path("r3") +
                " --export x.gguf"
                " --export-type q4_0",
            "q4_0"},
           {train + " --lr 0.5", "lr"},
           {"export " + Path("nope.gguf") + " -o " + Path("x.gguf"), "nope.gguf"},
       }) {
    r = Grove(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\n" << r.err;
  }
}

// The README's first command: no -m, the bundled pair, its draft mixed with suffix drafting,
// speculation that changes nothing. At run's default temperature the mixture verifies with
// Sequoia's sampled rule (children drawn from the draft model's rows), not target-sample.
TEST_F(CliTest, RunWithoutAModelUsesTheBundledPair) {
  CommandResult r = Grove("run -p \"Once upon a time\" -n 40 --temp 0 --compare");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("bundled models"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("draft-model+suffix drafter, verify greedy"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("τ = "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("outputs identical"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
  r = Grove("run -p \"Once upon a time\" -n 24 -s 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("draft-model+suffix drafter, verify sequoia"), std::string::npos) << r.err;
}

// --device: `auto` (the default) runs where it can; `cuda` without a GPU (or without a CUDA build)
// is an error naming why, before any output; --version says what CUDA found.
TEST_F(CliTest, DeviceChoiceNamesWhatIsThere) {
  const CommandResult version = Grove("--version");
  ASSERT_EQ(version.exit_code, 0) << version.err;
  EXPECT_NE(version.out.find("cuda: "), std::string::npos) << version.out;
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present (cuda_test covers it)";
  const CommandResult gpu = Grove("run -p \"Once upon a time\" -n 8 --temp 0 --device cuda");
  EXPECT_EQ(gpu.exit_code, 1) << gpu.err;
  EXPECT_NE(gpu.err.find("cuda: " + cuda::NoDeviceReason()), std::string::npos) << gpu.err;
  EXPECT_EQ(gpu.out, "");
  const CommandResult automatic = Grove("run -p \"Once upon a time\" -n 8 --temp 0 --device auto");
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_NE(automatic.err.find("| cpu, threads"), std::string::npos) << automatic.err;
  EXPECT_EQ(automatic.err.find("warning"), std::string::npos) << automatic.err;
}

// --cache-type f16: the bundled pair speculates with half-float caches (the target's and its
// draft's) to plain decoding's text with them, the run says which cache it kept, a bench reports
// half the float cache's bytes, and a type grove does not keep is refused by name.
TEST_F(CliTest, HalfFloatCacheRunsAndIsReported) {
  const CommandResult r =
      Grove("run -p \"Once upon a time\" -n 48 --temp 0 --compare --cache-type f16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("kv f16"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("outputs identical"), std::string::npos) << r.err;
  const std::string bench = " -p 0 -n 8 -r 1 --probe-mib 0 -t 1 -m " + Model("q8_0");
  const CommandResult half = Grove("bench --cache-type f16" + bench);
  const CommandResult full = Grove("bench" + bench);
  ASSERT_EQ(half.exit_code, 0) << half.err;
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_NE(half.out.find("f16 KV cache"), std::string::npos) << half.out;
  EXPECT_NE(full.out.find("f32 KV cache"), std::string::npos) << full.out;
  const CommandResult bad = Grove("run -p x -n 1 --cache-type q8_0");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--cache-type"), std::string::npos) << bad.err;
}

// Issue 30: grove starts without the network commands' libraries (4 ms of every process);
// serve, serve-bench and pipe run in grove-net beside it, as if grove had run them; a grove
// copied alone says what it lacks.
TEST_F(CliTest, NetworkCommandsRunInGroveNetAndGroveLoadsNoneOfTheirLibraries) {
  const CommandResult libraries = Shell("ldd", kGroveCli);
  ASSERT_EQ(libraries.exit_code, 0) << libraries.err;
  for (const char* lib : {"libcpp-httplib", "libssl", "libcrypto", "libmpi"})
    EXPECT_EQ(libraries.out.find(lib), std::string::npos) << lib << "\n" << libraries.out;
  const CommandResult help = Grove("--help");
  for (const char* command : {"serve ", "serve-bench ", "pipe "})
    EXPECT_NE(help.out.find(command), std::string::npos) << command;
  const CommandResult serve_help = Grove("serve --help");
  EXPECT_EQ(serve_help.exit_code, 0) << serve_help.err;
  EXPECT_NE(serve_help.out.find("--parallel"), std::string::npos) << serve_help.out;
  const CommandResult pipe = Grove("pipe --stages 1x");
  EXPECT_EQ(pipe.exit_code, 1) << pipe.err;  // grove-net's own check of the option
  EXPECT_NE(pipe.err.find("--stages: '1x'"), std::string::npos) << pipe.err;
  const std::string alone = Path("alone");
  std::filesystem::create_directories(alone);
  std::filesystem::copy_file(kGroveCli, alone + "/grove",
                             std::filesystem::copy_options::overwrite_existing);
  const CommandResult lacking = Shell(alone + "/grove", "serve");
  EXPECT_EQ(lacking.exit_code, 1);
  EXPECT_NE(lacking.err.find("grove-net, which must be beside grove"), std::string::npos)
      << lacking.err;
  EXPECT_EQ(Shell(alone + "/grove", "--version").exit_code, 0);  // the rest runs alone
}

// The drafters without a model and a mixture, by name: run drafts with them and gives plain
// decoding's text; serve starts with them (and keeps serving until interrupted).
TEST_F(CliTest, DraftersByNameRunAndServe) {
  const std::string target = std::string(GROVE_MODELS_DIR) + "/grove-base-target.gguf";
  const std::string mixture = std::string(GROVE_MODELS_DIR) + "/grove-base-draft.gguf+suffix";
  for (const char* draft : {"ngram", "suffix", mixture.c_str()}) {
    SCOPED_TRACE(draft);
    CommandResult r = Grove("run -m " + target + " --draft " + draft +
                            " -p \"Once upon a time\" -n 24 --temp 0 --spec chain:3 --compare");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string name = draft == mixture ? "draft-model+suffix" : draft;
    EXPECT_NE(r.err.find(name + " drafter"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("outputs identical"), std::string::npos) << r.err;
    // The server runs until it says it serves (at most 120 s: a sanitizer build starts slowly),
    // reloads its drafter on SIGHUP (until it says so), then stops on SIGINT as on Ctrl-C; the
    // shell's status is the server's.
    const std::string log = Path("serve.log");
    const auto wait_for = [&](const std::string& text) {
      return "i=0; while [ $i -lt 1200 ] && ! grep -q \"" + text + "\" " + log +
             " && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i+1)); done; ";
    };
    // The log of the drafter before is removed first: found by the first wait, it had the HUP
    // sent before this server installed its handler, which then died of it.
    r = Shell("sh -c 'rm -f " + log + "; " + std::string(kGroveCli) + " serve -m " + target +
                  " --draft " + draft + " --port 0 2>" + log + " & pid=$!; " +
                  wait_for("serving ") + "kill -HUP $pid; " + wait_for("drafter reloaded") +
                  "kill -INT $pid; wait $pid'",
              "");
    EXPECT_EQ(r.exit_code, 0) << ReadWholeFile(log);
    EXPECT_NE(ReadWholeFile(log).find(std::string("(draft ") + draft), std::string::npos)
        << ReadWholeFile(log);
    EXPECT_NE(
        ReadWholeFile(log).find(std::string("drafter reloaded from ") + draft + " (" + name + ")"),
        std::string::npos)
        << ReadWholeFile(log);
  }
}

// Issue 30: auto measures nothing before decoding; a run keeps what it measured for the next (in
// GROVE_CACHE_DIR); a corrupt kept file is reported in one line and rewritten; a cache directory
// that cannot be made is no error; the report names load, prefill and decode, and --compare the
// whole call's speedup beside decoding's.
TEST_F(CliTest, AutoKeepsItsVerifyCurveBetweenRuns) {
  const std::string cache = Path("verify-cache");
  const std::string run = "GROVE_CACHE_DIR=" + cache + " " + std::string(kGroveCli) +
                          " run --pair small -p \"Once upon a time\" -n 200 --temp 0 -t 1 "
                          "--ignore-eos";
  auto grove = [&](const std::string& env_and_args) {
    return testing::RunShellCommand(env_and_args, Path("stdout.txt"), Path("stderr.txt"));
  };
  auto kept_files = [&] {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache, ec)) files.push_back(e.path());
    return files;
  };
  CommandResult r = grove(run + " --compare");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part : {"load ", "(target ", "draft ", "prefill ", "decode ", "decoding, ",
                           "whole call", "outputs identical"}) {
    EXPECT_NE(r.err.find(part), std::string::npos) << part << "\n" << r.err;
  }
  // Runs leave one verify curve for the pair's target on this machine and the packed weights of
  // target and draft (model/packed_weight_cache.h), which later runs map; no temporary beside them.
  for (int i = 0; i < 3; ++i) ASSERT_EQ(grove(run).exit_code, 0);
  std::vector<fs::path> files, packed;
  for (const fs::path& file : kept_files()) {
    (file.extension() == ".bin" ? packed : files).push_back(file);
  }
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].extension(), ".json");
  EXPECT_NE(ReadWholeFile(files[0]).find("\"curve\""), std::string::npos);
  // The scalar kernels compute every matrix as the file stores it: nothing is packed or kept.
  const bool packs = Grove("--version").out.find("kernels: scalar") == std::string::npos;
  EXPECT_EQ(packed.size(), packs ? 2u : 0u);
  r = grove(run + " -v");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const fs::path& file : packed) {
    EXPECT_NE(r.err.find("packed weights from '" + file.string() + "'"), std::string::npos)
        << r.err;
  }
  // Corrupt: one line says so, the run goes on, the file is rewritten.
  std::ofstream(files[0]) << "{ not json";
  r = grove(run);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("ignoring the cached verify curve"), std::string::npos) << r.err;
  EXPECT_NE(ReadWholeFile(files[0]).find("grove-verify-cost-cache"), std::string::npos);
  // A cache directory under a regular file cannot exist: no caching, no error.
  const std::string blocked = "GROVE_CACHE_DIR=" + files[0].string() + "/sub " +
                              std::string(kGroveCli) +
                              " run --pair small -p hi -n 20 --temp 0 -t 1";
  r = grove(blocked);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
}

// Tree-of-thought search on the small bundled pair under SEED's rounds, its SVG tree, and the
// policy benchmark's check that every policy generated the same tokens.
TEST_F(CliTest, TotSearchesAndTotBenchComparesPolicies) {
  const std::string svg = Path("tree.svg");
  CommandResult r = Grove(
      "tot --pair small --puzzle \"4 9 10 13\" --thoughts 1 --breadth 2 --policy seed "
      "--direct --tree-out " +
      svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("answer: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("search tree (thoughts 1, breadth 2, steps 3)"), std::string::npos);
  EXPECT_NE(r.out.find("step 1: 1 states -> generate 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("direct answer: "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("seed (tree auto: "), std::string::npos) << r.err;
  // Issue 32: tot drafts with the bundled draft mixed with suffix drafting, as run and serve do.
  EXPECT_NE(r.err.find(".gguf+suffix; tree "), std::string::npos) << r.err;
  EXPECT_NE(ReadWholeFile(svg).find("<svg xmlns="), std::string::npos);
  const std::string json_path = Path("tot.json");
  r = Grove(
      "tot-bench --pair small --puzzles \"4 9 10 13\" --reps 1 --thoughts 1 --breadth 2 "
      "--json " +
      json_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("identical across policies"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(ReadWholeFile(json_path));
  EXPECT_TRUE(j.at("outputs_identical").get<bool>());
  for (const char* policy : {"serial-ar", "serial-sd", "seed", "batched"}) {
    const nlohmann::json& p = j.at("policies").at(policy);
    EXPECT_GT(p.at("median").get<double>(), 0.0) << policy;
    EXPECT_GT(p.at("tokens").get<int64_t>(), 0) << policy;
  }
  EXPECT_EQ(j.at("policies").at("serial-ar").at("tau").get<double>(), 1.0);
  EXPECT_EQ(j.at("policies").at("seed").at("sequences_per_forward").get<double>(), 1.0);
  // --spec auto: each speculative policy reports the tree its scheduler chose; serial-ar has none.
  EXPECT_TRUE(j.at("policies").at("serial-ar").at("trees").empty());
  EXPECT_EQ(j.at("policies").at("batched").at("trees").at(0).get<std::string>().rfind("auto: ", 0),
            0u);
}

// Output meant for pipes and logs: `tree --dot` prints the graph alone on stdout, and progress
// written to a file (stderr is one here) has no carriage returns.
TEST_F(CliTest, OutputsAreCleanForPipesAndLogs) {
  std::ofstream(Path("pipe-prompts.txt")) << "abc abc abc abc\n\nhello hello hello\n";
  const std::string accept = std::string(GROVE_MODELS_DIR) + "/grove-pair.greedy.accept.json";
  CommandResult r = Grove("tree --dot --budget 6 --accept " + accept);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("digraph", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("G = "), std::string::npos) << r.err;  // the summary went to stderr
  r = Grove("bench -m " + Model("q8_0") +
            " --draft ngram --spec chain:2 -r 2 -t 1 --spec-tokens 4 --prompts " +
            Path("pipe-prompts.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("repetition 2/2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  r = Grove("calibrate -m " + Model("q8_0") + " --draft " + Model("q8_0") + " --prompts " +
            Path("pipe-prompts.txt") + " --width 2 -n 4 -t 1 -o " + Path("pipe-accept.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("prompt 2/2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
}

// With no prompt, generation starts from the BOS token, as `run --help` says (the bundled models
// have one, though they do not prepend it to text).
TEST_F(CliTest, RunWithoutAPromptStartsFromBos) {
  const CommandResult r = Grove("run -n 8 --temp 0 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("BOS"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stop: length"), std::string::npos) << r.err;
}

// OPT-Tree with a draft model decodes to the end of the context and stops there, like every other
// tree: the room check covers the draft's cache, which fills first.
TEST_F(CliTest, OptTreeWithADraftStopsCleanlyAtTheEndOfTheContext) {
  for (const char* spec : {"opt:16,0.5", "opt:32,0.2"}) {
    // The small pair in a short context reaches the end in a fifth of the base pair's time (the
    // test runs under the sanitizers too).
    const CommandResult r = Grove(std::string("run --pair small -c 192 --spec ") + spec +
                                  " -p \"Once upon a time\" -n 400 --temp 0 --ignore-eos -t 1");
    ASSERT_EQ(r.exit_code, 0) << spec << "\n" << r.err;
    EXPECT_NE(r.err.find("stop: context full"), std::string::npos) << spec << "\n" << r.err;
  }
}

TEST_F(CliTest, BadInputsFailWithAMessageNamingTheProblem) {
  struct Case {
    std::string args;
    std::string message;  // must appear on stderr
  };
  const std::string q8 = Model("q8_0");
  const Case cases[] = {
      {"quantize " + Path("missing.gguf") + " " + Path("x.gguf") + " q8_0", "missing.gguf"},
      {"quantize " + q8 + " " + Path("x.gguf") + " q9_9", "unknown type 'q9_9'"},
      {"quantize " + q8 + " " + Path("x.gguf") + " iq2_xxs",
       "'iq2_xxs' is a GGUF type grove does not write"},
      {"quantize " + q8 + " " + Path("no/such/dir/x.gguf") + " q8_0", "does not exist"},
      {"quantize " + q8 + " " + q8 + " f16", "is the input file"},
      {"quantize " + q8 + " " + Path("x.gguf") + " q8_0 --bogus", "--bogus"},
      {"bench -m " + Path("missing.gguf") + " -p 1 -n 0 -r 1 --probe-mib 0", "missing.gguf"},
      {"bench -m " + q8 + " -r 0", "-r 0"},
      {"bench -m " + q8 + " -t -1", "--threads: -1 is outside"},
      {"bench -m " + q8 + " --verify-curve 0", "--verify-curve: n=0"},
      {"bench -m " + q8 + " --verify-curve 1,100000", "n=100000"},
      {"bench -m " + q8 + " -o csv", "csv"},
      {"bench -m " + q8 + " --profile-out " + Path("p.json"), "--verify-curve"},
      {"bench -m " + q8 + " -m " + q8 + " --verify-curve 1 --profile-out " + Path("p.json"),
       "one (model, threads)"},
      {"bench -m " + q8 + " -p 0 -n 0", "nothing to measure"},
      {"tot --task chess --puzzle \"1 2 3 4\"", "unknown task 'chess'"},
      {"tot --puzzle \"4 9 x 13\"", "'x' is not a whole number"},
      {"tot --puzzle \"1 2 3\"", "has 3 numbers; expected 4"},
      {"tot --puzzle \"4 9 10 14\"", "14 is out of range"},
      {"tot --puzzle \"4 9 10 13\" --thoughts 0", "thoughts must be 1 to 1024"},
      {"tot --puzzle \"4 9 10 13\" --policy fast", "unknown scheduling policy 'fast'"},
      {"tot", "give --puzzle"},
      {"tot-bench --reps 0", "--reps 0"},
  };
  for (const Case& c : cases) {
    const CommandResult r = Grove(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\nstderr: " << r.err;
  }
  EXPECT_FALSE(fs::exists(Path("x.gguf")));
  EXPECT_FALSE(testing::PartialFileLeft(Path("x.gguf")));
  EXPECT_FALSE(fs::exists(Path("p.json")));
}

}  // namespace
}  // namespace grove
