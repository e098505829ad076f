// grove tot-bench: the four scheduling policies over the same Game-of-24 searches with the same
// seeds, repeated; wall time (median, min-max), speedup over serial-ar, tau, share of time the
// target is busy, mean queue wait, sequences per verify forward, the speculative time split; and a
// check that every policy generated the same tokens for every sequence (exit status 1 otherwise).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/text_list.h"
#include "bench_stats.h"
#include "commands.h"
#include "output_path.h"
#include "speculation_report.h"
#include "tasks/game24_puzzles.h"
#include "tot/scheduled_generator.h"
#include "tot/thought_search.h"
#include "tot_engine.h"

namespace grove::cli {
namespace {

struct TotBenchOptions {
  TotModelOptions model;
  std::string puzzles;  // "4 9 10 13;1 5 5 5"
  int count = 2;        // held-out puzzles when --puzzles is not given
  int reps = 3;
  std::string policies = "serial-ar,serial-sd,seed,batched";
  int32_t thoughts = 3;
  int32_t breadth = 5;
  int32_t steps = 3;
  std::string json_out;
};

// The items of a list that hold more than white space.
std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  for (const std::string_view item : SplitList(text, sep)) {
    if (item.find_first_not_of(" \t") != std::string_view::npos) out.emplace_back(item);
  }
  return out;
}

std::string FormatSpeedup(double speedup) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2fx", speedup);
  return text;
}

struct PolicyRuns {
  SchedulePolicy policy;
  std::vector<double> wall;        // seconds per rep, all puzzles
  ScheduleStats totals;            // summed over reps
  int solved = 0;                  // of the last rep
  std::vector<std::string> trees;  // the trees the policy's schedulers used, each once
};

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : " / ") + item;
  return out.empty() ? "-" : out;
}

std::vector<Game24Puzzle> ReadPuzzles(const TotBenchOptions& o) {
  std::vector<Game24Puzzle> puzzles;
  if (o.puzzles.empty()) {
    if (o.count < 1) Fail("--count ", o.count, " must be >= 1");
    return Game24Puzzles(kGame24HeldOutSeed, o.count);
  }
  for (const std::string& p : Split(o.puzzles, ';')) puzzles.push_back(ParseGame24Puzzle(p));
  return puzzles;
}

// The tokens every policy must generate for every sequence: the first policy's (serial-ar's draws
// equal the speculative ones only under greedy or target-sample verification).
class OutputCheck {
 public:
  explicit OutputCheck(bool plain_draws) : plain_draws_(plain_draws) {}
  void Check(SchedulePolicy policy, const std::vector<std::vector<int32_t>>& outputs) {
    const bool ar = policy == SchedulePolicy::kSerialAr;
    std::vector<std::vector<int32_t>>& ref = ar && !plain_draws_ ? reference_ar_ : reference_;
    if (ref.empty()) {
      ref = outputs;
      return;
    }
    if (ref == outputs) return;
    ++mismatches_;
    std::size_t first = 0;
    while (first < std::min(ref.size(), outputs.size()) && ref[first] == outputs[first]) ++first;
    std::fprintf(stderr, "[grove] %s generated other tokens than the reference (sequence %zu)\n",
                 std::string(SchedulePolicyName(policy)).c_str(), first);
  }
  int mismatches() const { return mismatches_; }

 private:
  bool plain_draws_;
  std::vector<std::vector<int32_t>> reference_, reference_ar_;
  int mismatches_ = 0;
};

// One repetition of one policy: every puzzle searched, its wall time and the trees it used.
void RunPolicy(const TotBenchOptions& o, const std::vector<Game24Puzzle>& puzzles,
               const ThoughtSearchSettings& settings, TotEngine& engine, int rep, PolicyRuns& run,
               OutputCheck& check) {
  Scheduler& scheduler = engine.SchedulerFor(run.policy);
  ScheduledGenerator generator(scheduler, engine.tokenizer());
  double wall = 0;
  run.solved = 0;
  for (std::size_t p = 0; p < puzzles.size(); ++p) {
    ThoughtSearchSettings s = settings;
    s.seed = static_cast<uint64_t>(o.model.seed) * 1000003 + p;
    const ThoughtSearchResult r = SolveGame24WithThoughts(puzzles[p], s, generator.AsFunction());
    wall += r.seconds;
    run.solved += r.correct;
  }
  run.wall.push_back(wall);
  if (IsSpeculative(run.policy)) {
    const std::string& tree = scheduler.options().speculation.plan.text;
    if (std::find(run.trees.begin(), run.trees.end(), tree) == run.trees.end()) {
      run.trees.push_back(tree);
    }
  }
  run.totals += generator.totals();
  std::fprintf(stderr, "[grove] rep %d %-9s %.2f s\n", rep + 1,
               std::string(SchedulePolicyName(run.policy)).c_str(), wall);
  check.Check(run.policy, generator.outputs());
}

// Each part of the step split, in seconds per rep.
nlohmann::json SplitSeconds(const StepTimes& times, int reps) {
  nlohmann::json split;
  for (const StepPart& p : kStepParts) split[p.key] = times.*p.seconds / reps;
  return split;
}

nlohmann::json PolicyJson(const TotBenchOptions& o, const TotEngine& engine, const PolicyRuns& run,
                          const SampleStats& w, double speedup) {
  const ScheduleStats& t = run.totals;
  return {{"wall_seconds", run.wall},
          {"trees", run.trees},
          {"median", w.median},
          {"min", w.min},
          {"max", w.max},
          {"speedup_vs_serial_ar", speedup},
          {"tau", t.tau()},
          {"target_busy", t.busy_share()},
          {"mean_queue_wait_seconds", t.mean_queue_wait()},
          {"sequences_per_forward", t.sequences_per_forward()},
          {"target_forwards", t.target_forwards / o.reps},
          {"tokens", t.generated / o.reps},
          {"forks", t.forks / o.reps},
          {"target_threads", engine.TargetThreads(run.policy)},
          {"split", SplitSeconds(t.times, o.reps)}};
}

// The table of the policies, each against serial-ar's median wall time; and their JSON.
void PrintPolicies(const TotBenchOptions& o, const TotEngine& engine,
                   const std::vector<PolicyRuns>& runs, std::size_t n_puzzles,
                   nlohmann::json& json) {
  const PolicyRuns* ar = nullptr;
  for (const PolicyRuns& run : runs) {
    if (run.policy == SchedulePolicy::kSerialAr) ar = &run;
  }
  const double ar_median = ar ? Summarize(ar->wall).median : 0.0;
  std::printf(
      "| policy | tree | target threads | wall s (median) | min-max | speedup vs serial-ar | tau | "
      "target busy | queue wait ms | seqs/forward | tokens | solved |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const PolicyRuns& run : runs) {
    const SampleStats w = Summarize(run.wall);
    const ScheduleStats& t = run.totals;
    const double speedup = ar ? ar_median / w.median : 0.0;
    const std::string name(SchedulePolicyName(run.policy));
    std::printf(
        "| %s | %s | %d | %.2f | %.2f-%.2f | %s | %.2f | %.0f%% | %.2f | %.2f | %lld | %d/%zu |\n",
        name.c_str(), Joined(run.trees).c_str(), engine.TargetThreads(run.policy), w.median, w.min,
        w.max, ar ? FormatSpeedup(speedup).c_str() : "-", t.tau(), 100.0 * t.busy_share(),
        1e3 * t.mean_queue_wait(), t.sequences_per_forward(),
        static_cast<long long>(t.generated / o.reps), run.solved, n_puzzles);
    json["policies"][name] = PolicyJson(o, engine, run, w, speedup);
  }
}

void PrintSplitsAndMemory(const TotBenchOptions& o, const TotEngine& engine,
                          const std::vector<PolicyRuns>& runs) {
  std::printf(
      "\ntime split per rep, summed over sequences (drafting overlaps verification under "
      "seed and batched, so it can exceed the wall time):\n");
  for (const PolicyRuns& run : runs) {
    if (!IsSpeculative(run.policy)) continue;
    StepTimes per_rep = run.totals.times;
    per_rep /= o.reps;
    std::printf("  %-9s %s\n", std::string(SchedulePolicyName(run.policy)).c_str(),
                FormatStepSplit(per_rep).c_str());
  }
  std::printf(
      "\nmemory: target KV %.1f MiB per slot (%d slots), draft lane %.1f MiB per sequence "
      "in flight; weights %.1f MiB held once\n",
      engine.target_slot_bytes() / 1048576.0, engine.options().slots,
      engine.draft_lane_bytes() / 1048576.0, engine.weight_bytes() / 1048576.0);
}

int RunTotBench(const TotBenchOptions& o) {
  InstallStderrLog(o.model.verbose);
  if (!o.json_out.empty()) CheckOutputFile(o.json_out, "--json");
  if (o.reps < 1) Fail("--reps ", o.reps, " must be >= 1");
  const std::vector<Game24Puzzle> puzzles = ReadPuzzles(o);
  std::vector<PolicyRuns> runs;
  for (const std::string& name : Split(o.policies, ',')) {
    runs.push_back({.policy = ParseSchedulePolicy(name)});
  }
  if (runs.empty()) Fail("--policies is empty");
  ThoughtSearchSettings settings{.thoughts = o.thoughts, .breadth = o.breadth, .steps = o.steps};
  ValidateThoughtSearchSettings(settings);

  TotEngine engine(o.model);
  const SpeculationPolicy& speculation = engine.speculation();
  OutputCheck check(speculation.rule == VerifyRule::kGreedy ||
                    speculation.rule == VerifyRule::kTargetSample);
  for (int rep = 0; rep < o.reps; ++rep) {
    // Rotate the order each repetition, so drift of a shared machine does not favour one policy.
    for (std::size_t k = 0; k < runs.size(); ++k)
      RunPolicy(o, puzzles, settings, engine, rep, runs[(k + rep) % runs.size()], check);
  }
  std::printf(
      "tree-of-thought Game of 24: %zu puzzles, thoughts %d, breadth %d, steps %d, %d reps; "
      "tree %s, rule %s, temperature %.2f, slots %d\n",
      puzzles.size(), settings.thoughts, settings.breadth, settings.steps, o.reps,
      speculation.plan.text.c_str(), std::string(VerifyRuleName(speculation.rule)).c_str(),
      engine.options().sampling.temperature, engine.options().slots);
  nlohmann::json json{{"puzzles", nlohmann::json::array()},
                      {"thoughts", settings.thoughts},
                      {"breadth", settings.breadth},
                      {"steps", settings.steps},
                      {"reps", o.reps},
                      {"tree", speculation.plan.text},
                      {"rule", VerifyRuleName(speculation.rule)},
                      {"temperature", engine.options().sampling.temperature},
                      {"outputs_identical", check.mismatches() == 0}};
  for (const Game24Puzzle& p : puzzles) json["puzzles"].push_back(p);
  PrintPolicies(o, engine, runs, puzzles.size(), json);
  PrintSplitsAndMemory(o, engine, runs);
  std::printf("outputs per sequence: %s\n", check.mismatches() == 0
                                                ? "identical across policies and repetitions"
                                                : "DIFFER (a bug: please report it)");
  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out);
    if (!out || !(out << json.dump(2) << "\n")) Fail("cannot write '", o.json_out, "'");
  }
  return check.mismatches() == 0 ? 0 : 1;
}

}  // namespace

void AddTotBenchCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tot-bench",
      "Benchmark the scheduling policies on tree-of-thought searches (same puzzles, same seeds): "
      "wall time, speedup over serial-ar, tau, target busy share, queue wait; checks outputs");
  auto o = std::make_shared<TotBenchOptions>();
  cmd->add_option("--puzzles", o->puzzles, "Puzzles separated by ';' (e.g. \"4 9 10 13;1 5 5 5\")");
  cmd->add_option("--count", o->count, "Without --puzzles: this many held-out puzzles")
      ->capture_default_str();
  cmd->add_option("--reps", o->reps, "Repetitions (medians and spread)")->capture_default_str();
  cmd->add_option("--policies", o->policies, "Policies to compare, comma-separated")
      ->capture_default_str();
  cmd->add_option("--thoughts", o->thoughts, "Propose generations per state")
      ->capture_default_str();
  cmd->add_option("--breadth", o->breadth, "States kept per step")->capture_default_str();
  cmd->add_option("--steps", o->steps, "BFS steps")->capture_default_str();
  cmd->add_option("--json", o->json_out, "Also write the results as JSON");
  AddTotModelOptions(*cmd, o->model);
  cmd->callback([o] {
    const int status = RunTotBench(*o);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace grove::cli
