// The grove binary that the end-to-end tests run (cli_test, bad_input_test, pipe_mpi_test,
// template_command_test): its path is given by the build, tests/CMakeLists.txt.
#pragma once

#ifndef GROVE_CLI
#error "GROVE_CLI (path of the grove binary) must be defined by the build"
#endif

namespace grove {

inline constexpr char kGroveCli[] = GROVE_CLI;

}  // namespace grove
