// grove serve-bench: load on an OpenAI-compatible server (grove serve started in-process over the
// bundled pair, or any server by --url, llama-server included) from 1, 4, 16... concurrent
// streaming clients, each sending requests one after another. Per level and mode: aggregate
// completion tokens per second (median and spread over repetitions), time to first token and
// inter-token latency (per request: from its first token to its last, per token; median, p95).
// Modes are grove's per-request speculation field ("spec": the server's default tree, "off": plain
// serving, which batches the clients' tokens too), run interleaved in one run so their ratio is
// measured under the same conditions. Against a grove server, /metrics read before and after each
// level also gives where the server's verifying thread spent the level (its rounds: waiting for
// drafts, the target forward, the rest) and how many sequences a forward verified.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/median.h"
#include "base/text_list.h"
#include "bench_stats.h"
#include "commands.h"
#include "event_stream_client.h"
#include "option_checks.h"
#include "output_path.h"
#include "prompt_file.h"
#include "serve_engine.h"

namespace grove::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct ServeBenchOptions {
  ServeModelOptions server;
  std::string url;  // empty: start grove serve in-process
  std::string clients = "1,4,16";
  std::string modes = "spec,off";
  int requests = 4;  // per client and level
  int max_tokens = 96;
  double temperature = 0.0;
  int reps = 3;
  std::string prompts_file;
  std::string json_out;
};

// The p-quantile by nearest rank (0.95: p95).
double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double MedianOf(std::vector<double> v) { return Median(v); }

int TotalClients(const std::vector<int>& levels) {
  int total = 0;
  for (int clients : levels) total += clients;
  return total;
}

// One level (mode, clients) once: every client's requests, timed.
struct LevelRun {
  double wall = 0.0;
  int64_t tokens = 0;
  int failed = 0;
  std::string first_failure;      // what the first failed request got
  std::vector<double> ttft, itl;  // seconds
};

std::string DescribeFailure(const EventStreamResult& result) {
  if (!result.error.empty()) return result.error;
  return StrCat("HTTP status ", result.status, result.body.empty() ? "" : ": ",
                result.body.substr(0, 200));
}

struct Target {
  std::string host;
  int port = 0;
  std::string api_key;
};

// One streamed request's figures.
struct RequestRun {
  EventStreamResult result;
  int64_t tokens = 0;        // completion tokens (usage), else one per chunk with text
  std::vector<double> ttft;  // seconds to the first text, when some came
  Clock::time_point sent, first_text, last;
};

RequestRun RunRequest(const Target& target, const nlohmann::json& body) {
  RequestRun r;
  r.sent = Clock::now();
  r.last = r.first_text = r.sent;
  bool first = true;
  int64_t chunks = 0;
  r.result = PostEventStream(
      target.host, target.port, "/v1/completions", body.dump(),
      [&](std::string_view data) {
        if (data == "[DONE]") return true;
        nlohmann::json chunk;
        try {
          chunk = ParseBoundedJson(data, "an event");
        } catch (const Error&) {
          return true;  // not one of the server's events
        }
        if (chunk.contains("usage") && chunk["usage"].is_object()) {
          r.tokens = chunk["usage"].value("completion_tokens", int64_t{0});
        }
        const auto& choices = chunk.value("choices", nlohmann::json::array());
        if (choices.empty() || choices[0].value("text", std::string()).empty()) return true;
        const Clock::time_point now = Clock::now();
        if (first) {
          r.ttft.push_back(std::chrono::duration<double>(now - r.sent).count());
          r.first_text = now;
        }
        first = false;
        r.last = now;
        ++chunks;
        return true;
      },
      target.api_key);
  if (r.tokens == 0) r.tokens = chunks;  // a server without usage: one token a chunk
  return r;
}

nlohmann::json RequestBody(const ServeBenchOptions& o, const std::string& mode,
                           const std::string& prompt, int seed) {
  nlohmann::json body{{"prompt", prompt},
                      {"max_tokens", o.max_tokens},
                      {"temperature", o.temperature},
                      {"seed", seed},
                      {"stream", true},
                      {"stream_options", {{"include_usage", true}}}};
  if (mode != "default") body["grove"] = {{"speculation", mode == "spec" ? "auto" : mode}};
  return body;
}

// Adds a request's figures to the level's (a failure is counted, its figures dropped).
void AddRequest(const RequestRun& r, LevelRun& run) {
  if (!r.result.error.empty() || r.result.status != 200) {
    if (run.failed++ == 0) run.first_failure = DescribeFailure(r.result);
    return;
  }
  run.tokens += r.tokens;
  run.ttft.insert(run.ttft.end(), r.ttft.begin(), r.ttft.end());
  // Inter-token latency per request (vLLM's time per output token): speculation emits
  // several tokens per step at once, so gaps between chunks would say little.
  if (r.tokens > 1) {
    run.itl.push_back(std::chrono::duration<double>(r.last - r.first_text).count() /
                      (r.tokens - 1));
  }
}

LevelRun RunLevel(const Target& target, const std::string& mode, int clients, int requests,
                  const ServeBenchOptions& o, const std::vector<std::string>& prompts) {
  LevelRun run;
  std::mutex mutex;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(clients));
  const Clock::time_point start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int r = 0; r < requests; ++r) {
        const RequestRun request = RunRequest(
            target,
            RequestBody(o, mode, prompts[(c * requests + r) % prompts.size()], c * 1000 + r));
        std::lock_guard lock(mutex);
        AddRequest(request, run);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  run.wall = std::chrono::duration<double>(Clock::now() - start).count();
  return run;
}

// A grove server's round counters (/metrics); absent on other servers. A level's are the
// difference of two readings. A sequence's statistics reach /metrics when it finishes, within its
// last round, so a reading misses at most the round then under way.
struct RoundCounters {
  bool present = false;
  double forwards = 0, steps = 0, draft_wait = 0, forward = 0, other = 0;

  RoundCounters& operator+=(const RoundCounters& b) {
    present = present || b.present;
    forwards += b.forwards;
    steps += b.steps;
    draft_wait += b.draft_wait;
    forward += b.forward;
    other += b.other;
    return *this;
  }
  RoundCounters operator-(const RoundCounters& b) const {
    return {present && b.present,      forwards - b.forwards, steps - b.steps,
            draft_wait - b.draft_wait, forward - b.forward,   other - b.other};
  }
};

RoundCounters ReadRoundCounters(const Target& target) {
  const EventStreamResult metrics = Get(target.host, target.port, "/metrics", target.api_key);
  RoundCounters c;
  if (metrics.status != 200) return c;
  const std::string& body = metrics.body;
  auto value = [&](const std::string& name, bool* found) {
    const std::size_t at = body.find("\n" + name + " ");
    if (at == std::string::npos) {
      *found = false;
      return 0.0;
    }
    return std::strtod(body.c_str() + at + name.size() + 2, nullptr);
  };
  bool found = true;
  c.forwards = value("grove_target_forwards_total", &found);
  c.steps = value("grove_sequence_steps_total", &found);
  c.draft_wait = value("grove_round_seconds_total{part=\"draft_wait\"}", &found);
  c.forward = value("grove_round_seconds_total{part=\"forward\"}", &found);
  c.other = value("grove_round_seconds_total{part=\"other\"}", &found);
  c.present = found;
  return c;
}

// One level and mode over every repetition.
struct Cell {
  std::vector<double> tokens_per_second;
  std::vector<double> ttft, itl;
  int failed = 0;
  RoundCounters rounds;
};

struct BenchPlan {
  std::vector<int> levels;  // clients
  std::vector<std::string> modes;
  std::vector<std::string> prompts;
};

BenchPlan ReadBenchPlan(const ServeBenchOptions& o) {
  if (o.requests < 1 || o.reps < 1 || o.max_tokens < 1) {
    Fail("--requests, --reps and --max-tokens must be >= 1");
  }
  BenchPlan plan;
  for (const std::string_view c : SplitList(o.clients)) {
    if (c.empty()) continue;
    const int k = std::atoi(std::string(c).c_str());
    if (k < 1 || k > 1024) Fail("--clients: '", c, "' is not a count from 1 to 1024");
    plan.levels.push_back(k);
  }
  for (const std::string_view m : SplitList(o.modes)) {
    if (!m.empty()) plan.modes.emplace_back(m);
  }
  if (plan.levels.empty() || plan.modes.empty())
    Fail("--clients and --modes must name at least one");
  if (!o.json_out.empty()) CheckOutputFile(o.json_out, "--json");
  plan.prompts = {"Once upon a time", "Tom has 5 apples. He", "The little bird",
                  "One day, a girl named Lily"};
  if (!o.prompts_file.empty()) plan.prompts = ReadPromptFile(o.prompts_file);
  return plan;
}

// The server to load: --url, or grove serve started here with a slot for every client.
Target StartTarget(const ServeBenchOptions& o, const BenchPlan& plan,
                   std::unique_ptr<ServeEngine>& engine, std::string& described) {
  Target target{.host = "127.0.0.1", .api_key = o.server.api_key};
  described = o.url;
  if (o.url.empty()) {
    ServeModelOptions server = o.server;
    server.port = 0;
    server.parallel =
        std::max(server.parallel, *std::max_element(plan.levels.begin(), plan.levels.end()));
    engine = std::make_unique<ServeEngine>(server);
    engine->Start();
    target.port = engine->port();
    described = engine->Describe();
    return target;
  }
  const std::string rest =
      o.url.substr(o.url.find("://") == std::string::npos ? 0 : o.url.find("://") + 3);
  const auto colon = rest.find(':');
  target.host = rest.substr(0, colon);
  target.port = colon == std::string::npos ? 80 : std::atoi(rest.substr(colon + 1).c_str());
  return target;
}

// Every level and mode, o.reps times, the modes rotated so that drift favours none.
std::vector<std::vector<Cell>> RunCells(const ServeBenchOptions& o, const BenchPlan& plan,
                                        const Target& target, int& failed,
                                        std::string& first_failure) {
  const std::vector<std::string>& modes = plan.modes;
  std::vector<std::vector<Cell>> cells(plan.levels.size(), std::vector<Cell>(modes.size()));
  for (int rep = 0; rep < o.reps; ++rep) {
    for (std::size_t l = 0; l < plan.levels.size(); ++l) {
      for (std::size_t k = 0; k < modes.size(); ++k) {
        const std::size_t m = (k + rep) % modes.size();
        const RoundCounters before = ReadRoundCounters(target);
        const LevelRun run =
            RunLevel(target, modes[m], plan.levels[l], o.requests, o, plan.prompts);
        Cell& cell = cells[l][m];
        cell.rounds += ReadRoundCounters(target) - before;
        cell.tokens_per_second.push_back(run.wall > 0 ? run.tokens / run.wall : 0.0);
        cell.ttft.insert(cell.ttft.end(), run.ttft.begin(), run.ttft.end());
        cell.itl.insert(cell.itl.end(), run.itl.begin(), run.itl.end());
        cell.failed += run.failed;
        if (failed == 0 && run.failed > 0) first_failure = run.first_failure;
        failed += run.failed;
        std::fprintf(stderr, "[grove] rep %d, %d clients, %s: %.1f tokens/s\n", rep + 1,
                     plan.levels[l], modes[m].c_str(), cell.tokens_per_second.back());
      }
    }
  }
  return cells;
}

// The table of every cell, each against the last mode's speed at its level; and their JSON.
void PrintCells(const BenchPlan& plan, const std::vector<std::vector<Cell>>& cells,
                nlohmann::json& json) {
  std::printf(
      "| clients | mode | tokens/s (median) | min-max | vs %s | TTFT ms median | p95 | ITL ms "
      "per token, median | p95 | failed |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      plan.modes.back().c_str());
  for (std::size_t l = 0; l < plan.levels.size(); ++l) {
    const double base = Summarize(cells[l].back().tokens_per_second).median;
    for (std::size_t m = 0; m < plan.modes.size(); ++m) {
      const Cell& cell = cells[l][m];
      const SampleStats s = Summarize(cell.tokens_per_second);
      const double ttft = MedianOf(cell.ttft), itl = MedianOf(cell.itl);
      std::printf("| %d | %s | %.1f | %.1f-%.1f | %.2fx | %.1f | %.1f | %.2f | %.2f | %d |\n",
                  plan.levels[l], plan.modes[m].c_str(), s.median, s.min, s.max,
                  base > 0 ? s.median / base : 0.0, 1e3 * ttft, 1e3 * Percentile(cell.ttft, 0.95),
                  1e3 * itl, 1e3 * Percentile(cell.itl, 0.95), cell.failed);
      json["levels"].push_back({{"clients", plan.levels[l]},
                                {"mode", plan.modes[m]},
                                {"tokens_per_second", cell.tokens_per_second},
                                {"median", s.median},
                                {"ttft_median", ttft},
                                {"ttft_p95", Percentile(cell.ttft, 0.95)},
                                {"itl_median", itl},
                                {"itl_p95", Percentile(cell.itl, 0.95)},
                                {"failed", cell.failed}});
    }
  }
}

// Where a grove server's verifying thread spent each cell (from /metrics); nothing for others.
void PrintRounds(const BenchPlan& plan, const std::vector<std::vector<Cell>>& cells,
                 nlohmann::json& json) {
  if (!cells.front().front().rounds.present) return;
  std::printf(
      "\nwhere the server's verifying thread spent each level (summed over repetitions)\n"
      "| clients | mode | sequences per forward | round ms | waiting for drafts | forward | "
      "rest (accept, stream) |\n|---:|---|---:|---:|---:|---:|---:|\n");
  for (std::size_t l = 0; l < plan.levels.size(); ++l) {
    for (std::size_t m = 0; m < plan.modes.size(); ++m) {
      const RoundCounters& c = cells[l][m].rounds;
      const double total = c.draft_wait + c.forward + c.other;
      if (!c.present || c.forwards <= 0 || total <= 0) continue;
      std::printf("| %d | %s | %.2f | %.3f | %.1f%% | %.1f%% | %.1f%% |\n", plan.levels[l],
                  plan.modes[m].c_str(), c.steps / c.forwards, 1e3 * total / c.forwards,
                  100 * c.draft_wait / total, 100 * c.forward / total, 100 * c.other / total);
      json["levels"][l * plan.modes.size() + m]["rounds"] = {{"forwards", c.forwards},
                                                             {"steps", c.steps},
                                                             {"draft_wait_seconds", c.draft_wait},
                                                             {"forward_seconds", c.forward},
                                                             {"other_seconds", c.other}};
    }
  }
}

int RunServeBench(const ServeBenchOptions& o) {
  InstallStderrLog(o.server.verbose);
  const BenchPlan plan = ReadBenchPlan(o);
  std::unique_ptr<ServeEngine> engine;
  std::string described;
  const Target target = StartTarget(o, plan, engine, described);
  // Warm-up: the first request makes an auto tree choose itself, and shows that the server
  // answers before anything is announced.
  const LevelRun warm_up = RunLevel(target, plan.modes.front(), 1, 1, o, plan.prompts);
  if (warm_up.failed > 0)
    Fail("serve-bench: ", described, " did not answer: ", warm_up.first_failure);
  std::fprintf(stderr,
               "[grove] load on %s: clients %s, %d requests each, %d tokens, temperature "
               "%.2f, modes %s, %d reps\n",
               described.c_str(), o.clients.c_str(), o.requests, o.max_tokens, o.temperature,
               o.modes.c_str(), o.reps);
  int failed = 0;
  std::string first_failure;
  const std::vector<std::vector<Cell>> cells = RunCells(o, plan, target, failed, first_failure);
  std::printf("serving %s\n", described.c_str());
  nlohmann::json json{{"server", described},
                      {"max_tokens", o.max_tokens},
                      {"temperature", o.temperature},
                      {"requests_per_client", o.requests},
                      {"reps", o.reps},
                      {"levels", nlohmann::json::array()}};
  PrintCells(plan, cells, json);
  PrintRounds(plan, cells, json);
  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out);
    if (!out || !(out << json.dump(2) << "\n")) Fail("cannot write '", o.json_out, "'");
  }
  // The table is printed either way (it says where); a run with failed requests is not a result.
  if (failed > 0) {
    Fail("serve-bench: ", failed, " of ",
         o.reps * o.requests * TotalClients(plan.levels) * plan.modes.size(),
         " requests failed (the first: ", first_failure, ")");
  }
  return 0;
}

}  // namespace

void AddServeBenchCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve-bench", kServeBenchSummary);
  auto o = std::make_shared<ServeBenchOptions>();
  AddServeModelOptions(*cmd, o->server);
  cmd->add_option("--url", o->url,
                  "A running server (e.g. http://127.0.0.1:8080, llama-server too); default: "
                  "start grove serve in-process with --parallel at least the most clients");
  cmd->add_option("--clients", o->clients, "Concurrent clients per level, comma-separated")
      ->capture_default_str();
  cmd->add_option("--modes", o->modes,
                  "Per-request speculation: spec (the server's tree), off (plain), a tree spec, "
                  "or default (send no grove field: any server)")
      ->capture_default_str();
  cmd->add_option("--requests", o->requests, "Requests each client sends, one after another")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("-n,--max-tokens", o->max_tokens, "max_tokens of every request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temp", o->temperature, "Temperature of every request")
      ->capture_default_str()
      ->check(FiniteRange(0.0, 2.0));
  cmd->add_option("--reps", o->reps, "Repetitions of every level (medians and spread)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--prompts", o->prompts_file,
                  "Prompt file (one per line; default: four stories)");
  cmd->add_option("--json", o->json_out, "Also write the results as JSON");
  cmd->callback([o] {
    const int status = RunServeBench(*o);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace grove::cli
