// The CLI under bad input: a table of command lines that must each be refused cleanly. For every
// row the grove binary runs with its own stdout and stderr, and the test asserts that it
//   - ends by itself within a time bound (a FIFO read or an unbounded job would hang it),
//   - exits with status 1 (refused while running) or 2 (usage), not by a signal (an uncaught
//     exception aborts, a division by zero raises SIGFPE),
//   - says so in exactly one line, `error: ...`, naming the problem (a sanitizer report, a
//     backtrace or a help dump is more than one line),
//   - changes nothing: every file of the scratch directory keeps its type, size and time, and no
//     file or directory appears (a `.partial`, a log, a half-made run directory).
// Each row is one mistake a new user makes; the sweep of issue #12 found most of them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "grove_cli.h"
#include "llama_cpp_reference.h"
#include "test_support.h"

namespace grove {
namespace {

namespace fs = std::filesystem;

// Generous: every row is refused in well under a second in a release build; the sanitizer build
// is several times slower, and a hang is caught all the same.
constexpr auto kTimeBound = std::chrono::seconds(60);

struct Outcome {
  bool finished = false;  // false: killed at the time bound
  bool signaled = false;
  int status = -1;  // exit status, or the signal number when signaled
  std::string out, err;
};

// Runs the grove binary with `args` (no shell: each argument as given), stdin from /dev/null.
Outcome RunGrove(const std::vector<std::string>& args, const fs::path& out_file,
                 const fs::path& err_file) {
  std::vector<std::string> argv_storage = {kGroveCli};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Outcome r;
  const auto deadline = std::chrono::steady_clock::now() + kTimeBound;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      r.finished = true;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.signaled = WIFSIGNALED(status);
  r.status = r.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
  r.out = testing::ReadWholeFile(out_file);
  r.err = testing::ReadWholeFile(err_file);
  return r;
}

// What the scratch directory holds: each entry's type, size and modification time.
using Snapshot = std::map<std::string, std::tuple<int, uintmax_t, int64_t>>;

Snapshot Take(const fs::path& dir) {
  Snapshot s;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0) continue;
    const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                          static_cast<int64_t>(st.st_mtim.tv_nsec);
    s[fs::relative(e.path(), dir).string()] = {static_cast<int>(st.st_mode & S_IFMT),
                                               static_cast<uintmax_t>(st.st_size), mtime};
  }
  return s;
}

std::vector<std::string> Split(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::TempDirectory("bad_input"));
    logs_ = new fs::path(testing::TempDirectory("bad_input_logs"));  // outside the watched one
    const Outcome synth = RunGrove(Split("synth --shape tiny --type q8_0 -o " + Path("model.gguf")),
                                   *logs_ / "out", *logs_ / "err");
    ASSERT_EQ(synth.status, 0) << synth.err;
    fs::create_directories(Path("dir"));
    ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0644), 0);
    fs::create_symlink(Path("model.gguf"), Path("link.gguf"));
    std::ofstream(Path("file.txt")) << "not a directory\n";
    fs::create_directories(Path("corpus"));
    std::ofstream(Path("corpus") + "/train.txt") << "a corpus part\n";
    // Directories whose files a command appends to or replaces: FIFOs where they would be.
    fs::create_directories(Path("fifo-run"));
    ASSERT_EQ(::mkfifo(Path("fifo-run/log.tsv").c_str(), 0644), 0);
    fs::create_directories(Path("fifo-corpus"));
    ASSERT_EQ(::mkfifo(Path("fifo-corpus/train.txt").c_str(), 0644), 0);
    fs::create_directories(Path("hf"));
    std::ofstream(Path("hf/tokenizer.json")) << "{}\n";
    std::ofstream(Path("prompts.txt")) << "hello world\n\nonce upon a time\n";
    // JSON nested far deeper than any real file: refused while it is parsed (base/bounded_json.h).
    std::ofstream(Path("deep.json")) << std::string(100000, '[') << std::string(100000, ']');
    fs::copy_file(std::string(GROVE_MODELS_DIR) + "/grove-pair.greedy.accept.json",
                  Path("accept.json"));
    // Files that are not what they say (tests/family_test.cc has the library's side).
    using testing::FamilyDraftSpec;
    using testing::FamilyTestSpec;
    testing::WriteRelabelledModel(FamilyTestSpec("qwen2", GgmlType::kQ8_0), "llama",
                                  Path("qwen2-as-llama.gguf"));
    testing::WriteRelabelledModel(FamilyTestSpec("qwen3", GgmlType::kQ8_0), "mixtral",
                                  Path("moe.gguf"));
    testing::WriteRelabelledModel(
        FamilyTestSpec("gemma3", GgmlType::kQ8_0), "gemma3", Path("bad-heads.gguf"),
        [](GgufWriter& w) { w.SetUint32("gemma3.attention.head_count_kv", 3); });
    RandomModelSpec far = FamilyDraftSpec("gemma3", GgmlType::kQ8_0);
    far.n_vocab = 320;
    RandomModelWriter(FamilyTestSpec("gemma3", GgmlType::kQ8_0)).WriteFile(Path("gemma.gguf"));
    RandomModelWriter(far).WriteFile(Path("far-vocab.gguf"));
    // A weight type llama.cpp writes and grove does not read (yet).
    RandomModelSpec k_quant = FamilyTestSpec("llama", GgmlType::kQ8_0);
    k_quant.n_embd = k_quant.n_ff = 256;
    testing::WriteModelWithTensorType(k_quant, Path("iq2_xxs.gguf"), "blk.0.attn_q.weight",
                                      GgmlType::kIQ2_XXS);
    fs::copy_file(Path("model.gguf"), Path("readonly.gguf"));
    fs::copy_file(Path("model.gguf"), Path("draft.gguf"));
    fs::permissions(Path("readonly.gguf"), fs::perms::owner_read | fs::perms::group_read);
    // A character device (the null device's numbers) needs root; the rows using it skip without.
    has_device_ = ::mknod(Path("device").c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete logs_;
  }

  static std::string Path(const std::string& name) { return (*dir_ / name).string(); }

  static fs::path* dir_;
  static fs::path* logs_;
  static bool has_device_;
};

fs::path* BadInputTest::dir_ = nullptr;
fs::path* BadInputTest::logs_ = nullptr;
bool BadInputTest::has_device_ = false;

struct BadInput {
  std::vector<std::string> args;
  std::string message;  // must appear in the one error line
};

TEST_F(BadInputTest, EveryRowIsRefusedInOneLineAndChangesNothing) {
  const std::string m = Path("model.gguf");
  const std::string models = GROVE_MODELS_DIR;
  const std::string pair =
      "-m " + models + "/grove-target.gguf --draft " + models + "/grove-draft.gguf";
  const std::string calibrate = "calibrate -m " + m + " --draft " + m + " --prompts " +
                                Path("prompts.txt") + " -o " + Path("new.json");
  const std::string train_args = " --tokenizer " + models + "/grove-target.gguf -o " + Path("run");
  std::vector<BadInput> rows;
  auto add = [&rows](const std::string& args, const std::string& message) {
    rows.push_back({Split(args), message});
  };
  // A directory, a FIFO or a missing file where a file is read.
  add("run " + pair + " --spec file:" + Path("dir") + " -p hi -n 4", "is a directory");
  add("tree --accept " + Path("dir"), "is a directory");
  add("tree --accept " + Path("accept.json") + " --profile " + Path("dir"), "is a directory");
  add("tree --accept " + Path("fifo"), "not a regular file");
  add("bench -m " + m + " --draft ngram --spec file:" + Path("dir") + " --prompts " +
          Path("prompts.txt") + " -r 1",
      "is a directory");
  add("bench -m " + m + " --draft ngram --spec chain:2 -r 1 --prompts " + Path("dir"),
      "is a directory");
  add("info " + Path("fifo"), "not a regular file");
  add("info " + Path("dir"), "not a regular file");
  add("run -m " + Path("fifo") + " -p hi", "not a regular file");
  add("run -m " + m + " -f " + Path("dir"), "is a directory");
  add("run -m " + m + " -f " + Path("fifo"), "not a regular file");
  add("calibrate -m " + m + " --draft " + m + " --prompts " + Path("fifo") + " -o " +
          Path("new.json"),
      "not a regular file");
  add("eval -m " + m + " --corpus " + Path("nope"), "does not exist");
  // Outputs that must not be written.
  add("quantize " + m + " " + Path("fifo") + " q8_0", "a FIFO");
  add("quantize " + m + " " + Path("link.gguf") + " q8_0", "a symbolic link");
  add("quantize " + m + " " + Path("dir") + " q8_0", "a directory");
  add("quantize " + m + " " + m + " q8_0", "is the input file");
  add("quantize " + m + " " + Path("no/such/dir/x.gguf") + " q8_0", "does not exist");
  add("quantize " + m + " " + Path("file.txt/x.gguf") + " q8_0", "is not a directory");
  add("slice -m " + m + " --layers 1 -o " + m, "is the input file");
  add("slice -m " + m + " --layers 1 -o " + Path("fifo"), "a FIFO");
  add("export " + m + " -o " + m, "is the input file");
  add("synth --shape tiny -o " + Path("fifo"), "a FIFO");
  add("synth --shape tiny -o " + Path("dir"), "a directory");
  add("tokenizer-train --corpus " + Path("nope") + " -o " + Path("dir"), "a directory");
  add("tree --accept " + Path("accept.json") + " -o " + Path("dir"), "a directory");
  add("tokenizer-train --corpus " + Path("corpus") + " -o " + Path("corpus") + "/train.txt",
      "is the input file");
  add("tree --accept " + Path("accept.json") + " -o " + Path("accept.json"), "is the input file");
  // Every file grove writes passes the same check (issue 72: convert-tokenizer checked nothing,
  // the suffix store was written over whatever it named, logs were opened as they were).
  add("convert-tokenizer " + Path("hf") + " -o " + Path("hf/tokenizer.json"), "is the input file");
  add("convert-tokenizer " + Path("hf/tokenizer.json") + " -o " + Path("fifo"), "a FIFO");
  add("convert-tokenizer " + Path("hf") + " -o " + Path("link.gguf"), "a symbolic link");
  add("convert-tokenizer " + Path("hf") + " -o " + Path("readonly.gguf"), "read-only (--force");
  add("serve -m " + m + " --draft " + m + "+suffix --suffix-store " + m, "is the input file");
  add("serve -m " + m + " --draft " + Path("draft.gguf") + "+suffix --suffix-store " +
          Path("draft.gguf"),
      "is the input file");
  add("serve -m " + m + " --draft suffix --suffix-store " + m, "is the input file");
  add("serve -m " + m + " --draft suffix --suffix-store " + Path("link.gguf"), "a symbolic link");
  add("serve -m " + m + " --record " + Path("fifo-corpus"), "a FIFO");
  // A file that is not a suffix store is refused at start, not at exit when the outputs are lost.
  add("serve -m " + m + " --draft suffix --suffix-store " + Path("prompts.txt"),
      "will not replace");
  add("corpus --out " + Path("fifo-corpus"), "a FIFO");
  add("train --corpus " + Path("corpus") + " --tokenizer " + m + " -o " + Path("fifo-run"),
      "a FIFO");
  add("train-drafter --target " + m + " --corpus " + Path("corpus") + " -o " + Path("fifo-run"),
      "a FIFO");
  add("self-distill --target " + m + " --corpus " + Path("corpus") + " -o " + Path("fifo-corpus"),
      "a FIFO");
  add("tot -m " + m + " --json " + m, "is the input file");
  // Every file grove reads: a FIFO is refused, not read forever.
  add("template -m " + m + " --messages " + Path("fifo"), "not a regular file");
  add("template -m " + m + " --messages " + Path("deep.json"), "nesting deeper than 128 levels");
  add(calibrate + " --max-prompts 0", "--max-prompts");
  add("calibrate -m " + m + " --draft " + m + " --prompts " + Path("prompts.txt") + " -o " + m,
      "is the input file");
  add("bench -m " + m + " --verify-curve 1 --profile-out " + Path("dir"), "a directory");
  add("corpus --out " + Path("file.txt") + " --tokens 2000", "not a directory");
  add("corpus --out " + Path("small") + " --tokens 2000", "validation part");
  add("train --corpus " + Path("nope") + train_args, "does not exist");
  add("train --corpus " + Path("nope") + train_args + " --lr 5", "--lr");
  add("train --corpus " + Path("nope") + train_args + " --log-every 0", "--log-every");
  add("train --corpus " + Path("nope") + " --tokenizer " + m + " -o " + Path("file.txt"),
      "not a directory");
  add("train --corpus " + Path("nope") + train_args + " --export " + Path("dir"), "a directory");
  const std::string drafter_args =
      "train-drafter --target " + models + "/grove-target.gguf -o " + Path("run") + " --corpus ";
  add(drafter_args + Path("nope"), "does not exist");
  add(drafter_args + Path("nope") + " --drafter medusa", "not one of feature, parallel");
  add(drafter_args + Path("nope") + " --drafter parallel", "needs --masks");
  add(drafter_args + Path("nope") + " --masks 4", "is for --drafter parallel");
  add(drafter_args + Path("nope") + " --drafter parallel --masks 65", "--masks");
  add(drafter_args + Path("nope") + " --drafter parallel --masks 2 --mask-decay 0", "--mask-decay");
  add(drafter_args + Path("nope") + " --drafter parallel --masks 2 --mask-visibility all",
      "--mask-visibility");
  add(drafter_args + Path("nope") + " --seq-len 1", "--seq-len");
  add(drafter_args + Path("nope") + " --logit-weight 0 --feature-weight 0", "nothing to train");
  add(drafter_args + Path("nope") + " --feature-weight -1", "--feature-weight");
  add(drafter_args + Path("nope") + " --export " + Path("dir"), "a directory");
  add(drafter_args + Path("nope") + " --export-type q4_k", "--export-type");
  add(drafter_args + Path("nope") + " -t 100000", "threads");
  add("train-drafter --target " + m + " --corpus " + Path("nope") + " -o " + Path("file.txt"),
      "not a directory");
  const std::string distill = "self-distill --target " + m + " -o " + Path("new") + " --corpus ";
  add(distill + Path("nope"), "does not exist");
  add(distill + Path("corpus") + " --tokens 0", "--tokens");
  add(distill + Path("corpus") + " --lanes 0", "--lanes");
  add(distill + Path("corpus") + " --max-new 0", "--max-new");
  add(distill + Path("corpus") + " --max-new 2147483647", "--max-new");
  add(distill + Path("corpus") + " --temp -1", "--temp");
  add("self-distill --target " + m + " --corpus " + Path("corpus") + " -o " + Path("file.txt"),
      "not a directory");
  // Thread counts: 4 x the hardware threads at most, in every command that takes -t.
  add("run -m " + m + " -p hi -n 2 -t 1000000", "threads");
  add("run -m " + m + " -p hi -n 2 -t -3", "threads");
  add("quantize " + m + " " + Path("new.gguf") + " q8_0 -t 1000000", "threads");
  add(calibrate + " -t -4", "threads");
  add(calibrate + " -t 100000", "threads");
  add("bench -m " + m + " -p 8 -n 0 -r 1 -t 1,1000000", "threads");
  add("train --corpus " + Path("nope") + train_args + " -t 100000", "threads");
  // Numbers out of range.
  add("run -m " + m + " -p hi -n 2 -c 100000", "larger than the model's context");
  add("run -m " + m + " -p hi -n 2 --temp nan", "--temp");
  add("run " + pair + " --spec opt:16,2 -p hi -n 2", "at most 1");
  add("tree --accept " + Path("accept.json") + " --draft-cost -1", "--draft-cost");
  add("tree --accept " + Path("accept.json") + " --draft-cost nan", "--draft-cost");
  add("bench -m " + m + " -p 100000 -n 0 -r 1", "-p 100000 needs a context");
  add("bench -m " + m + " -p 0 -n 0 -r 1 --verify-curve 1 --curve-prefix 100000",
      "--curve-prefix 100000");
  add("corpus --out " + Path("big") + " --tokens 100000000000", "--tokens");
  // Many sequences and the server: options refused before any model loads or port opens.
  add("run --pair medium -p hi", "--pair");
  add("run --pair small -m " + m + " -p hi", "cannot be combined");
  add("tot -t 1000000", "threads");
  add("tot --temp nan", "--temp");
  add("tot --tree-out " + Path("fifo"), "a FIFO");
  add("tot-bench --count 1 --json " + Path("dir"), "a directory");
  add("serve --parallel 0", "--parallel");
  add("serve --port 70000", "--port");
  add("serve -t 100000", "threads");
  add("serve -m " + Path("fifo"), "not a regular file");
  add("serve --record /proc/grove-record", "--record");
  add("serve --record " + Path("fifo"), "--record");
  add("serve --draft ngram+", "empty name");
  add("serve --draft ngram --suffix-store " + Path("store.bin"), "needs suffix drafting");
  add("serve --suffix-store " + Path("dir"), "a directory");
  add("serve --draft ngram+ngram+" + Path("fifo"), "not a regular file");
  add("serve-bench --clients 0 --url http://127.0.0.1:9", "--clients");
  add("serve-bench --temp nan --url http://127.0.0.1:9", "--temp");
  add("serve-bench --json " + Path("dir") + " --url http://127.0.0.1:9", "a directory");
  add("pipe " + pair + " --stages 7", "stages for a model of 6 layers");
  add("pipe " + pair + " --stages 0", "--stages");
  add("pipe " + pair + " --stages 1", "PipeDec needs a pipeline of at least 2 steps");
  add("pipe " + pair + " --stages 4 --group-size 4", "PipeDec needs a pipeline of at least 2");
  add("pipe " + pair + " --transport threads --stages 1", "PipeDec needs a pipeline of at least 2");
  add("pipe " + pair + " --split 3,2", "covers 5 layers");
  add("pipe " + pair + " --link-us -5", "--link-us");
  add("pipe " + pair + " --width 0", "--width");
  add("pipe " + pair + " --static-tree opt:8,0.5", "static tree");
  add("pipe -m " + models + "/grove-target.gguf --draft " + m, "tokens but the target has");
  add("pipe --pair small -m " + models + "/grove-target.gguf", "--pair");
  add("run -m " + Path("qwen2-as-llama.gguf") + " -p hi -n 1",
      "tensor 'blk.0.attn_q.bias' is not used by architecture 'llama'");
  add("bench -m " + Path("moe.gguf") + " -p 8 -n 0 -r 1", "mixture-of-experts");
  add("run -m " + Path("iq2_xxs.gguf") + " -p hi -n 2",
      "has type iq2_xxs, which grove cannot compute");
  add("run -m " + Path("bad-heads.gguf") + " -p hi -n 1", "is not a multiple of head_count_kv 3");
  add("run -m " + Path("gemma.gguf") + " --draft " + Path("far-vocab.gguf") + " -p hi -n 4",
      "the draft has 320 tokens, the target 512");
  // The real runs: refused on every rank before anything runs.
  add("pipe " + pair + " --transport sockets", "--transport");
  add("pipe " + pair + " --transport threads --runs pp,fast", "not pp, stpp or pipedec");
  add("pipe " + pair + " --transport threads --stages 2,3", "one stage count");
  add("pipe " + pair + " --transport threads --stages 9", "stages for a model of 6 layers");
  add("pipe " + pair + " --transport threads --group-size 0", "--group-size");
  add("pipe " + pair + " --transport threads --timeout 0", "--timeout");
  // Empty prompts, unknown commands and options.
  add("run -m " + m + " --no-bos -n 2", "--no-bos leaves no token");
  add("frobnicate --help", "unknown command 'frobnicate'");
  add("frobnicate", "unknown command 'frobnicate'");
  add("run -m " + m + " --bogus", "--bogus");
  add("run -m " + m + " -p hi --spec chain:2", "--draft");
  // An empty value is refused for every option whose emptiness means nothing (it used to mean the
  // option's default in silence); a server that does not answer fails serve-bench.
  rows.push_back({{"run", "-m", ""}, "--model: an empty value is not allowed"});
  rows.push_back({{"run", "-m", m, "-p", "hi", "-n", ""}, "--n-predict: an empty value"});
  rows.push_back({{"run", "-m", m, "-p", "hi", "--draft", ""}, "--draft: an empty value"});
  rows.push_back({{"run", "-m", m, "-f", ""}, "--file: an empty value"});
  rows.push_back({{"serve", "-m", m, "--host", ""}, "--host: an empty value"});
  rows.push_back({{"quantize", m, "", "q8_0"}, "OUT: an empty value"});
  add("serve-bench --clients 1 --requests 1 --reps 1 --url http://127.0.0.1:1",
      "http://127.0.0.1:1 did not answer: could not connect");
  // Read-only by its mode bits, for root too (issue 34: access(2) let root replace it).
  add("quantize " + m + " " + Path("readonly.gguf") + " q8_0", "read-only (--force");
  if (has_device_) add("quantize " + m + " " + Path("device") + " q8_0", "a device");

  const Snapshot before = Take(*dir_);
  for (const BadInput& row : rows) {
    std::string command = "grove";
    for (const std::string& a : row.args) command += " " + a;
    SCOPED_TRACE(command);
    const auto start = std::chrono::steady_clock::now();
    const Outcome r = RunGrove(row.args, *logs_ / "out", *logs_ / "err");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(r.finished) << "still running after " << kTimeBound.count() << " s";
    EXPECT_FALSE(r.signaled) << "killed by signal " << r.status << "\n" << r.err;
    EXPECT_TRUE(r.status == 1 || r.status == 2) << "exit status " << r.status << "\n" << r.err;
    const bool one_line = !r.err.empty() && r.err.find('\n') == r.err.size() - 1;
    EXPECT_TRUE(one_line) << "stderr is not one line:\n" << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(row.message), std::string::npos)
        << "expected '" << row.message << "' in: " << r.err;
    EXPECT_EQ(Take(*dir_), before) << "the command changed the scratch directory";
    RecordProperty("seconds", std::to_string(seconds));
  }
  // The special files are still what they were.
  struct stat st {};
  ASSERT_EQ(::lstat(Path("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(::lstat(Path("link.gguf").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

// --force is what replaces a read-only model; without it the file is kept (row above).
TEST_F(BadInputTest, ForceReplacesAReadOnlyOutput) {
  const std::string target = Path("forced.gguf");
  fs::copy_file(Path("model.gguf"), target);
  fs::permissions(target, fs::perms::owner_read);
  const Outcome r =
      RunGrove(Split("quantize " + Path("model.gguf") + " " + target + " f32 --force"),
               *logs_ / "out", *logs_ / "err");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(fs::file_size(target), fs::file_size(Path("model.gguf")));  // f32 is larger than q8_0
  fs::remove(target);
}

}  // namespace
}  // namespace grove
