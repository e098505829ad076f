// grove and grove-net: lossless speculative decoding of GGUF language models. This file only
// dispatches; each sub-command lives in its own cmd_*.cc. Built twice (tools/grove/CMakeLists.txt):
// grove-net runs every command; grove runs all but serve, serve-bench and pipe, for which it
// executes grove-net, so that its own start loads no HTTP, TLS or MPI library.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "commands.h"
#include "cuda/device.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_set.h"
#include "option_checks.h"

namespace grove::cli {

void InstallStderrLog(bool verbose) {
  SetLogLevel(verbose ? LogLevel::kDebug : LogLevel::kWarn);
  SetLogCallback([](LogLevel level, std::string_view message) {
    static constexpr const char* kPrefix[] = {"debug: ", "", "warning: ", "error: "};
    std::fprintf(stderr, "%s%.*s\n", kPrefix[static_cast<int>(level)],
                 static_cast<int>(message.size()), message.data());
  });
}

namespace {

// Prints `error: MESSAGE` as one line (a message with line breaks is joined with "; ").
void PrintError(std::string_view message) {
  std::string line(message);
  for (std::size_t i = 0; (i = line.find('\n', i)) != std::string::npos;) line.replace(i, 1, "; ");
  std::fprintf(stderr, "error: %s\n", line.c_str());
}

// `grove NAME ...` where NAME is not a command: CLI11 would read NAME as a stray argument and, with
// --help anywhere after it, print the main help and exit 0, hiding the typo.
const char* UnknownCommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return nullptr;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(argv[1])) return nullptr;
  }
  return argv[1];
}

}  // namespace

#ifndef GROVE_NET_COMMANDS
// grove's stand-ins for the commands grove-net runs (grove-net, built from this file, has them).
void AddNetCommandEntries(CLI::App& app) {
  for (const NetCommand& net : kNetCommands) {
    // Never parsed here: main() has executed grove-net before the parse when one is named.
    app.add_subcommand(net.name, net.summary)->allow_extras();
  }
}

std::optional<int> RunNetCommandInGroveNet(int argc, char** argv) {
  if (argc < 2) return std::nullopt;
  const auto named =
      std::find_if(std::begin(kNetCommands), std::end(kNetCommands),
                   [&](const NetCommand& net) { return std::strcmp(argv[1], net.name) == 0; });
  if (named == std::end(kNetCommands)) return std::nullopt;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    PrintError(std::string("grove ") + named->name +
               " runs in grove-net, and where grove is cannot be read (/proc/self/exe: " +
               ec.message() + ")");
    return 1;
  }
  const std::string net = (self.parent_path() / "grove-net").string();
  ::execv(net.c_str(), argv);  // returns only on failure
  PrintError(std::string("grove ") + named->name +
             " runs in grove-net, which must be beside grove: '" + net +
             "': " + std::strerror(errno));
  return 1;
}
#endif

}  // namespace grove::cli

namespace grove::cli {
namespace {

void AddCommands(CLI::App& app) {
  AddRunCommand(app);
  AddInfoCommand(app);
  AddTokenizeCommand(app);
  AddConvertTokenizerCommand(app);
  AddChatCommand(app);
  AddSynthCommand(app);
  AddBenchCommand(app);
  AddQuantizeCommand(app);
  AddSliceCommand(app);
  AddCalibrateCommand(app);
  AddTreeCommand(app);
  AddCorpusCommand(app);
  AddTokenizerTrainCommand(app);
  AddTrainCommand(app);
  AddTrainDrafterCommand(app);
  AddSelfDistillCommand(app);
  AddExportCommand(app);
  AddEvalCommand(app);
  AddTotCommand(app);
  AddTotBenchCommand(app);
#ifdef GROVE_NET_COMMANDS
  AddServeCommand(app);
  AddServeBenchCommand(app);
  AddPipeCommand(app);
#else
  AddNetCommandEntries(app);
#endif
  AddTemplateCommand(app);
}

// grove --version: the version, the kernels chosen for this CPU and the GPU, if any.
void PrintVersion() {
  std::printf("grove %s\nkernels: %s (cpu: %s)\n", GROVE_VERSION, ActiveKernels().name,
              CpuFeatureString(HostCpuFeatures()).c_str());
  if (cuda::DeviceCount() > 0) {
    const cuda::DeviceInfo gpu = cuda::Info();
    std::printf("cuda: %s (sm_%d%d, %.1f GiB)\n", gpu.name.c_str(), gpu.major, gpu.minor,
                static_cast<double>(gpu.total_bytes) / (1 << 30));
  } else {
    std::printf("cuda: %s\n", cuda::NoDeviceReason().c_str());
  }
}

// Parses the command line and runs the command it names. Every failure ends here as one `error:`
// line and a non-zero exit: 2 for a command line CLI11 rejects, 1 for anything thrown while
// running, whatever its type (a filesystem, stream or thread error from the standard library
// included), so that no input aborts the process.
int ParseAndRun(CLI::App& app, const bool& version, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    if (version) {
      PrintVersion();
      return 0;
    }
    if (app.get_subcommands().empty()) std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::bad_alloc&) {
    PrintError("out of memory");
  } catch (const std::exception& e) {
    PrintError(e.what());
  } catch (...) {
    PrintError("unexpected exception");
  }
  return 1;
}

}  // namespace
}  // namespace grove::cli

int main(int argc, char** argv) {
#ifndef GROVE_NET_COMMANDS
  // Before anything else: grove-net starts as if it had been run.
  if (const std::optional<int> failed = grove::cli::RunNetCommandInGroveNet(argc, argv))
    return *failed;
#endif
  CLI::App app{
      "grove: lossless speculative decoding of Llama, Qwen, Gemma, Phi and Mistral GGUF models on "
      "the CPU or an NVIDIA GPU: run, chat, bench, an OpenAI-compatible server, pipelines across "
      "hosts"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version and the kernels selected for this CPU");
  grove::cli::AddCommands(app);
  grove::cli::RefuseEmptyValues(app);
  grove::cli::InstallStderrLog(false);
  // Usage errors are one line, like every other error; --help shows the usage.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("error: ") + e.what() + " (see --help)\n";
  });
  if (const char* name = grove::cli::UnknownCommand(app, argc, argv)) {
    std::fprintf(stderr, "error: unknown command '%s' (grove --help lists the commands)\n", name);
    return 2;
  }
  return grove::cli::ParseAndRun(app, version, argc, argv);
}
