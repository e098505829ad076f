#include "speculate/command_speculation.h"

#include "speculate/plan_files.h"

namespace grove {

TreePlanInputs CommandPlanInputs(const CommandSpeculation& command, int32_t max_tokens) {
  const std::string& accept =
      command.accept_file.empty() ? command.default_accept_file : command.accept_file;
  return ReadPlanInputs(accept, command.profile_file, max_tokens);
}

SpeculationPolicy ResolveCommandSpeculation(const CommandSpeculation& command, int32_t max_tokens,
                                            const DrafterTraits& drafter,
                                            const SamplerParams& sampling) {
  return ResolveSpeculation(command.request, CommandPlanInputs(command, max_tokens), drafter,
                            sampling);
}

}  // namespace grove
