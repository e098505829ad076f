// Sub-commands of the grove CLI. Each Add*Command registers its options on the app and sets the
// callback that runs it; the callback throws grove::Error for the user to see.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>

namespace grove::cli {

void AddRunCommand(CLI::App& app);
void AddInfoCommand(CLI::App& app);
void AddTokenizeCommand(CLI::App& app);
void AddConvertTokenizerCommand(CLI::App& app);
void AddChatCommand(CLI::App& app);
void AddSynthCommand(CLI::App& app);
void AddBenchCommand(CLI::App& app);
void AddQuantizeCommand(CLI::App& app);
void AddSliceCommand(CLI::App& app);
void AddCalibrateCommand(CLI::App& app);
void AddTreeCommand(CLI::App& app);
void AddCorpusCommand(CLI::App& app);
void AddTokenizerTrainCommand(CLI::App& app);
void AddTrainCommand(CLI::App& app);
void AddTrainDrafterCommand(CLI::App& app);
void AddSelfDistillCommand(CLI::App& app);
void AddExportCommand(CLI::App& app);
void AddEvalCommand(CLI::App& app);
void AddTotCommand(CLI::App& app);
void AddTotBenchCommand(CLI::App& app);
void AddServeCommand(CLI::App& app);
void AddServeBenchCommand(CLI::App& app);
void AddPipeCommand(CLI::App& app);
void AddTemplateCommand(CLI::App& app);

// The commands that talk over a network run in grove-net, a second executable beside grove
// (tools/grove/CMakeLists.txt says why): grove lists them in its help and executes grove-net in
// its place when one is named.
inline constexpr char kServeSummary[] =
    "OpenAI-compatible server (/v1/completions, /v1/chat/completions, /v1/models, /health, "
    "/metrics) that speculates for every request and verifies the clients' trees together";
inline constexpr char kServeBenchSummary[] =
    "Load an OpenAI-compatible server (grove serve in-process, or --url) with concurrent "
    "streaming clients: tokens/s, time to first token, inter-token latency, speculation "
    "against plain serving in one run";
inline constexpr char kPipeSummary[] =
    "Pipeline-parallel decoding through the target's layers split into stages: plain (PP), "
    "static-tree speculation (STPP) and PipeDec, outputs checked against plain decoding. "
    "--transport simulate (the default): per-token latency from a virtual clock of the "
    "measured stage costs and modelled links, on real and virtual stages. --transport threads "
    "or mpi: a real run, every stage and the draft a rank (mpirun -np STAGES+1 grove pipe "
    "--transport mpi ...), against what the clock predicts for it";
struct NetCommand {
  const char* name;
  const char* summary;
};
inline constexpr NetCommand kNetCommands[] = {
    {"serve", kServeSummary}, {"serve-bench", kServeBenchSummary}, {"pipe", kPipeSummary}};

// grove: lists kNetCommands in `app`'s help.
void AddNetCommandEntries(CLI::App& app);
// grove: when argv names one of kNetCommands, executes grove-net with the same arguments in this
// process's place; returns the exit status of a failure to (nothing when argv names none).
std::optional<int> RunNetCommandInGroveNet(int argc, char** argv);

// Installs a log callback that prints library diagnostics to stderr.
void InstallStderrLog(bool verbose);

}  // namespace grove::cli
