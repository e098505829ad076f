// What `grove train` and `grove train-drafter` do around a trainer's run: the export path checked
// before hours of training, Ctrl-C asking the trainer to stop after the step under way (and save
// its checkpoint), and the end of a run that was stopped.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "output_path.h"
#include "train/trainer.h"

namespace grove::cli {

// --export may go into a directory that does not exist yet (the run directory, typically): that
// directory must then be creatable (CreateExportDirectory creates it when the export is written);
// else the file must be writable and none of `rules`' inputs. Returns the directory. Nothing to
// check for an empty path.
std::filesystem::path CheckExportPath(const std::string& export_path, const OutputRules& rules);
void CreateExportDirectory(const std::filesystem::path& export_dir);

// Runs train(stop) with Ctrl-C setting *stop (a second Ctrl-C ends the process at once); the
// default handler is back when it returns or throws.
TrainResult RunStoppable(const std::function<TrainResult(const std::atomic<bool>* stop)>& train);
// Whether Ctrl-C asked the run under way to stop.
bool StopRequested();

// A run that was stopped says how to resume and fails with "COMMAND: interrupted".
void FailIfInterrupted(const TrainResult& r, const char* command);

}  // namespace grove::cli
