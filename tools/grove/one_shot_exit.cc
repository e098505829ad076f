#include "one_shot_exit.h"

#include <cstdio>
#include <cstdlib>

#include "model/model.h"
#include "model/model_parameters.h"

namespace grove::cli {

void ExitLeavingModelsToKernel(std::initializer_list<const Model*> models) {
  for (const Model* model : models) {
    if (model != nullptr) model->parameters()->FinishKeepingPackedWeights();
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}

}  // namespace grove::cli
