// grove tot: tree-of-thought search (BFS, ToT Algorithm 1) on the Game of 24, every generation of
// the thought generator and the state evaluator run through the scheduler under one policy; or,
// with --eval N, the success rate of the search against direct answering over N held-out puzzles.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/named.h"
#include "base/text_list.h"
#include "base/timer.h"
#include "commands.h"
#include "output_path.h"
#include "speculation_report.h"
#include "tasks/game24_answer.h"
#include "tasks/game24_puzzles.h"
#include "tot/scheduled_generator.h"
#include "tot/search_tree_writers.h"
#include "tot/thought_search.h"
#include "tot_engine.h"

namespace grove::cli {
namespace {

struct TotOptions {
  TotModelOptions model;
  std::string task = "game24";
  std::string puzzle;
  int32_t thoughts = 3;
  int32_t breadth = 5;
  int32_t steps = 3;
  // The fastest on the 2-core machine grove is measured on (`grove tot-bench`): seed and batched
  // give a core of the target's to the drafters, which a target this small misses more than it
  // gains from the overlap (docs/notebook.md, "Many sequences on 2 cores").
  std::string policy = "serial-sd";
  std::string tree_out;
  bool direct = false;
  int eval = 0;
  int64_t eval_seed = static_cast<int64_t>(kGame24HeldOutSeed);
  std::string settings = "1x1,3x1,3x5";
  std::string json_out;
  std::string arithmetic = "exact";
};

Game24Arithmetic ParseArithmetic(const std::string& name) {
  static constexpr Named<Game24Arithmetic> kNames[] = {
      {Game24Arithmetic::kExact, "exact"}, {Game24Arithmetic::kAsWritten, "as-written"}};
  return ParseNamed(kNames, name, "--arithmetic");
}

// "3x5,1x1" -> (thoughts, breadth) pairs.
std::vector<std::pair<int, int>> ParseSettings(const std::string& text) {
  std::vector<std::pair<int, int>> out;
  for (const std::string_view view : SplitList(text)) {
    const std::string item(view);
    int n = 0, b = 0;
    char x = 0, extra = 0;
    if (std::sscanf(item.c_str(), " %d %c %d %c", &n, &x, &b, &extra) != 3 || x != 'x') {
      Fail("--settings: '", item, "' is not THOUGHTSxBREADTH (e.g. 3x5)");
    }
    out.emplace_back(n, b);
  }
  if (out.empty()) Fail("--settings is empty");
  return out;
}

void PrintScheduleSummary(const Scheduler& scheduler, const ScheduleStats& s) {
  const std::string policy(SchedulePolicyName(scheduler.options().policy));
  const std::string tree = IsSpeculative(scheduler.options().policy)
                               ? " (tree " + scheduler.options().speculation.plan.text + ")"
                               : "";
  std::fprintf(stderr,
               "[grove] %s%s: %lld generations, %lld tokens in %.2f s of generation | target "
               "forwards %lld, busy %.0f%% | tau %.2f | %.2f sequences/forward | queue wait %.2f "
               "ms | forks %lld | in flight <= %d\n",
               policy.c_str(), tree.c_str(), static_cast<long long>(s.sequences),
               static_cast<long long>(s.generated), s.wall_seconds,
               static_cast<long long>(s.target_forwards), 100.0 * s.busy_share(), s.tau(),
               s.sequences_per_forward(), 1e3 * s.mean_queue_wait(),
               static_cast<long long>(s.forks), s.max_in_flight);
  if (s.times.total() > 0) {
    std::fprintf(stderr, "[grove] speculative time split (summed over sequences): %s\n",
                 FormatStepSplit(s.times).c_str());
  }
}

ThoughtSearchSettings SearchSettings(const TotOptions& o, int thoughts, int breadth) {
  ThoughtSearchSettings settings{.thoughts = thoughts,
                                 .breadth = breadth,
                                 .steps = o.steps,
                                 .seed = static_cast<uint64_t>(o.model.seed),
                                 .arithmetic = ParseArithmetic(o.arithmetic)};
  ValidateThoughtSearchSettings(settings);
  return settings;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !(out << text)) Fail("cannot write '", path, "'");
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string DirectAnswer(ScheduledGenerator& generator, const Game24Puzzle& puzzle, uint64_t key,
                         Game24Arithmetic arithmetic) {
  const GenerationRequest request{
      .prompt = Game24DirectPrompt(puzzle), .sequence = key, .max_tokens = 64};
  const std::vector<std::string> texts = generator.Generate({&request, 1});
  return Game24DirectAnswer(puzzle, texts.front(), arithmetic);
}

void SolveOne(const TotOptions& o, TotEngine& engine, SchedulePolicy policy) {
  const Game24Puzzle puzzle = ParseGame24Puzzle(o.puzzle);
  const ThoughtSearchSettings settings = SearchSettings(o, o.thoughts, o.breadth);
  Scheduler& scheduler = engine.SchedulerFor(policy);
  ScheduledGenerator generator(scheduler, engine.tokenizer());
  const ThoughtSearchResult result =
      SolveGame24WithThoughts(puzzle, settings, generator.AsFunction());
  std::printf("puzzle: %s\n", o.puzzle.c_str());
  std::printf("answer: %s (%s)\n", result.answer.empty() ? "none found" : result.answer.c_str(),
              result.correct ? "correct" : "not correct");
  std::printf("\nsearch tree (thoughts %d, breadth %d, steps %d):\n%s", settings.thoughts,
              settings.breadth, settings.steps, FormatSearchTreeText(result.tree).c_str());
  std::printf("\nphases (%s):\n", std::string(SchedulePolicyName(policy)).c_str());
  for (const ThoughtStepStats& s : result.steps) {
    std::printf(
        "  step %d: %d states -> generate %d in %.2f s (%d steps read, %d inconsistent, %d "
        "repeated) -> %d candidates -> evaluate %d in %.2f s -> keep %d\n",
        s.step, s.states, s.generate.generations, s.generate.seconds, s.parsed_steps,
        s.inconsistent, s.duplicates, s.candidates, s.evaluate.generations, s.evaluate.seconds,
        s.kept);
  }
  std::printf("  total %.2f s: generate %.2f s, evaluate %.2f s\n", result.seconds,
              result.generate.seconds, result.evaluate.seconds);
  PrintScheduleSummary(scheduler, generator.totals());
  if (o.direct) {
    const std::string answer =
        DirectAnswer(generator, puzzle, settings.seed ^ 0xd1ec7ull, settings.arithmetic);
    std::printf("direct answer: %s (%s)\n", answer.empty() ? "none" : answer.c_str(),
                Game24CheckAnswer(puzzle, answer) ? "correct" : "not correct");
  }
  if (!o.tree_out.empty()) {
    WriteFile(o.tree_out, EndsWith(o.tree_out, ".svg") ? SearchTreeSvg(result.tree)
                                                       : SearchTreeDot(result.tree));
    std::fprintf(stderr, "[grove] search tree written to %s\n", o.tree_out.c_str());
  }
}

// One puzzle answered directly and searched with each setting: its JSON row; the solved counts
// (direct first, then one per setting) grow by what it solved.
nlohmann::json EvaluatePuzzle(const TotOptions& o, const Game24Puzzle& puzzle, std::size_t p,
                              const std::vector<std::pair<int, int>>& settings_list,
                              ScheduledGenerator& generator, std::vector<int>& solved) {
  nlohmann::json row{{"puzzle", puzzle}};
  const std::string direct =
      DirectAnswer(generator, puzzle, static_cast<uint64_t>(o.model.seed) * 7919 + p,
                   ParseArithmetic(o.arithmetic));
  const bool direct_ok = Game24CheckAnswer(puzzle, direct);
  solved[0] += direct_ok;
  row["direct"] = {{"answer", direct}, {"correct", direct_ok}};
  for (std::size_t k = 0; k < settings_list.size(); ++k) {
    ThoughtSearchSettings s = SearchSettings(o, settings_list[k].first, settings_list[k].second);
    s.seed = static_cast<uint64_t>(o.model.seed) * 1000003 + p;
    const ThoughtSearchResult r = SolveGame24WithThoughts(puzzle, s, generator.AsFunction());
    solved[k + 1] += r.correct;
    row["bfs"].push_back({{"thoughts", s.thoughts},
                          {"breadth", s.breadth},
                          {"answer", r.answer},
                          {"correct", r.correct},
                          {"seconds", r.seconds}});
  }
  return row;
}

void Evaluate(const TotOptions& o, TotEngine& engine, SchedulePolicy policy) {
  if (o.eval_seed < 0) Fail("--eval-seed must be >= 0");
  const std::vector<Game24Puzzle> puzzles =
      Game24Puzzles(static_cast<uint64_t>(o.eval_seed), o.eval);
  const auto settings_list = ParseSettings(o.settings);
  for (const auto& [n, b] : settings_list) SearchSettings(o, n, b);  // validate all first
  Scheduler& scheduler = engine.SchedulerFor(policy);
  ScheduledGenerator generator(scheduler, engine.tokenizer());
  std::vector<int> solved(settings_list.size() + 1, 0);  // direct, then each setting
  nlohmann::json per_puzzle = nlohmann::json::array();
  Timer timer;
  for (std::size_t p = 0; p < puzzles.size(); ++p) {
    per_puzzle.push_back(EvaluatePuzzle(o, puzzles[p], p, settings_list, generator, solved));
    std::fprintf(stderr, "\r[grove] %zu/%zu puzzles, %.0f s", p + 1, puzzles.size(),
                 timer.Seconds());
  }
  std::fprintf(stderr, "\n");
  const double n = static_cast<double>(puzzles.size());
  std::printf("Game of 24, %zu held-out puzzles (seed %lld), arithmetic %s, temperature %.2f, %s\n",
              puzzles.size(), static_cast<long long>(o.eval_seed), o.arithmetic.c_str(),
              engine.options().sampling.temperature,
              std::string(SchedulePolicyName(policy)).c_str());
  std::printf("| method | thoughts | breadth | solved | success |\n|---|---:|---:|---:|---:|\n");
  std::printf("| direct answer | - | - | %d | %.1f%% |\n", solved[0], 100.0 * solved[0] / n);
  nlohmann::json summary{{"puzzles", puzzles.size()},
                         {"arithmetic", o.arithmetic},
                         {"seed", o.eval_seed},
                         {"temperature", engine.options().sampling.temperature},
                         {"direct", {{"solved", solved[0]}}}};
  for (std::size_t k = 0; k < settings_list.size(); ++k) {
    std::printf("| BFS | %d | %d | %d | %.1f%% |\n", settings_list[k].first,
                settings_list[k].second, solved[k + 1], 100.0 * solved[k + 1] / n);
    summary["bfs"].push_back({{"thoughts", settings_list[k].first},
                              {"breadth", settings_list[k].second},
                              {"solved", solved[k + 1]}});
  }
  PrintScheduleSummary(scheduler, generator.totals());
  if (!o.json_out.empty()) {
    summary["per_puzzle"] = per_puzzle;
    WriteFile(o.json_out, summary.dump(2) + "\n");
  }
}

void RunTot(const TotOptions& o) {
  InstallStderrLog(o.model.verbose);
  OutputRules rules{.inputs = DrafterFiles(o.model.draft)};
  rules.inputs.push_back(o.model.model);
  rules.inputs.push_back(o.model.accept_file);
  if (!o.json_out.empty()) CheckOutputFile(o.json_out, "--json", rules);
  if (!o.tree_out.empty()) CheckOutputFile(o.tree_out, "--tree-out", rules);
  if (o.task != "game24") Fail("unknown task '", o.task, "' (known: game24)");
  const SchedulePolicy policy = ParseSchedulePolicy(o.policy);
  if (o.eval == 0 && o.puzzle.empty()) Fail("give --puzzle \"4 9 10 13\" or --eval N");
  if (o.eval < 0) Fail("--eval ", o.eval, " must be > 0");
  if (!o.puzzle.empty()) ParseGame24Puzzle(o.puzzle);  // fail before loading anything
  SearchSettings(o, o.thoughts, o.breadth);
  TotEngine engine(o.model);
  if (o.eval > 0) {
    Evaluate(o, engine, policy);
  } else {
    SolveOne(o, engine, policy);
  }
}

}  // namespace

void AddTotCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tot",
      "Tree-of-thought search (BFS) on the Game of 24, its generations scheduled under a "
      "policy (serial-ar, serial-sd, seed, batched); --eval N: success rate over held-out "
      "puzzles against direct answering");
  auto o = std::make_shared<TotOptions>();
  cmd->add_option("--task", o->task, "Task (game24)")->capture_default_str();
  cmd->add_option("--puzzle", o->puzzle, "Four numbers from 1 to 13, e.g. \"4 9 10 13\"");
  cmd->add_option("--thoughts", o->thoughts, "Propose generations per state (n)")
      ->capture_default_str();
  cmd->add_option("--breadth", o->breadth, "States kept per step (b)")->capture_default_str();
  cmd->add_option("--steps", o->steps, "BFS steps (T)")->capture_default_str();
  cmd->add_option("--policy", o->policy,
                  "Scheduling: serial-ar, serial-sd, seed, batched (`grove tot-bench` says which "
                  "is fastest on this machine)")
      ->capture_default_str();
  cmd->add_option("--tree-out", o->tree_out, "Write the search tree: FILE.svg (SVG) or DOT");
  cmd->add_flag("--direct", o->direct, "Also answer directly (no search) and check it");
  cmd->add_option("--eval", o->eval, "Evaluate over N held-out puzzles instead of one");
  cmd->add_option("--eval-seed", o->eval_seed, "Seed of the held-out puzzles")
      ->capture_default_str();
  cmd->add_option("--settings", o->settings, "--eval: THOUGHTSxBREADTH settings to compare")
      ->capture_default_str();
  cmd->add_option("--json", o->json_out, "--eval: write per-puzzle results as JSON");
  cmd->add_option("--arithmetic", o->arithmetic,
                  "How steps the model writes are read: exact (its choice of numbers and "
                  "operation, computed exactly) or as-written (a step with wrong arithmetic is "
                  "dropped); direct answers are read the same way")
      ->capture_default_str();
  AddTotModelOptions(*cmd, o->model);
  cmd->callback([o] { RunTot(*o); });
}

}  // namespace grove::cli
