// grove pipe's options and its two halves: the virtual-clock simulator (cmd_pipe.cc) and the real
// runs with every unit a rank, threads of this process or MPI processes (pipe_ranks.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipe/stage_split.h"

#include "sample/sampler.h"

namespace grove::cli {

struct PipeOptions {
  std::string model, draft, pair;
  std::string prompt = "Once upon a time";
  int n_predict = 64;
  // --temp and the filters as every command registers them (temperature 0 by default), and --seed.
  SamplerParams sampling{.temperature = 0.0f, .seed = 0};
  std::string transport = "simulate";  // simulate, threads or mpi
  std::string stages = "2,3";
  std::string split;   // explicit layer counts, one run
  int group_size = 1;  // PipeDec: stages per group (the last group takes what is left)
  std::string sim_stages = "7,14,21";
  std::string link_us = "100";
  double bandwidth_gbps = 10.0;
  int width = 32;
  int children = 16;
  std::string static_tree = "kconfig:4,2,2,1";
  std::string sweep_width = "1,2,4,8,16,32";
  std::string sweep_children = "2,4,8,16";
  // The real runs.
  std::string runs = "pp,stpp,pipedec";
  int reps = 3;
  double timeout_seconds = 60.0;
  bool print_tokens = false;
  int threads = 1;
  bool verbose = false;
};

// A comma-separated list of counts >= 1, or of numbers >= 0; grove::Error naming `option`.
std::vector<int> IntList(const std::string& text, const char* option);
std::vector<double> NumberList(const std::string& text, const char* option);

// The options with the bundled pair filled in when no model is given; grove::Error without a
// draft or with -n < 2.
PipeOptions WithPairResolved(const PipeOptions& options);

int RunPipeSimulation(const PipeOptions& options);
// The real runs: this process's ranks (every rank a thread, or this process one MPI rank).
int RunPipeRanks(const PipeOptions& options);

}  // namespace grove::cli
