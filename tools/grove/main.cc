// grove: lossless speculative decoding for Llama-family models. This file only dispatches; each
// sub-command lives in its own cmd_*.cc.
#include <cstdio>
#include <iostream>

#include "base/error.h"
#include "base/log.h"
#include "commands.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_set.h"

namespace grove::cli {

void InstallStderrLog(bool verbose) {
  SetLogLevel(verbose ? LogLevel::kDebug : LogLevel::kWarn);
  SetLogCallback([](LogLevel level, std::string_view message) {
    static constexpr const char* kPrefix[] = {"debug: ", "", "warning: ", "error: "};
    std::fprintf(stderr, "%s%.*s\n", kPrefix[static_cast<int>(level)],
                 static_cast<int>(message.size()), message.data());
  });
}

}  // namespace grove::cli

int main(int argc, char** argv) {
  CLI::App app{"grove: lossless speculative decoding of Llama-family models on the CPU"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version and the kernels selected for this CPU");
  grove::cli::AddRunCommand(app);
  grove::cli::AddInfoCommand(app);
  grove::cli::AddTokenizeCommand(app);
  grove::cli::AddSynthCommand(app);
  grove::cli::AddBenchCommand(app);
  grove::cli::AddQuantizeCommand(app);
  grove::cli::AddSliceCommand(app);
  grove::cli::AddCalibrateCommand(app);
  grove::cli::AddTreeCommand(app);
  grove::cli::AddCorpusCommand(app);
  grove::cli::AddTokenizerTrainCommand(app);
  grove::cli::AddTrainCommand(app);
  grove::cli::AddExportCommand(app);
  grove::cli::AddEvalCommand(app);
  grove::cli::AddTotCommand(app);
  grove::cli::AddTotBenchCommand(app);
  grove::cli::AddServeCommand(app);
  grove::cli::AddServeBenchCommand(app);
  grove::cli::InstallStderrLog(false);
  try {
    app.parse(argc, argv);
    if (version) {
      std::printf("grove %s\nkernels: %s (cpu: %s)\n", GROVE_VERSION, grove::ActiveKernels().name,
                  grove::CpuFeatureString(grove::HostCpuFeatures()).c_str());
      return 0;
    }
    if (app.get_subcommands().empty()) {
      std::cout << app.help();
      return 0;
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const grove::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  return 0;
}
