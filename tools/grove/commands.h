// Sub-commands of the grove CLI. Each Add*Command registers its options on the app and sets the
// callback that runs it; the callback throws grove::Error for the user to see.
#pragma once

#include <CLI/CLI.hpp>

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

// Installs a log callback that prints library diagnostics to stderr.
void InstallStderrLog(bool verbose);

}  // namespace grove::cli
