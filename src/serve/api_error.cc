#include "serve/api_error.h"

#include <utility>

#include <nlohmann/json.hpp>

namespace grove::serve {

ApiError::ApiError(int status, std::string message, std::string type, std::string param)
    : std::runtime_error(message),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)) {}

nlohmann::json ApiError::ToJson() const {
  // OpenAI always sends all four keys; client libraries read `param` and `code` as nullable.
  nlohmann::json error = {
      {"message", what()},
      {"type", type_},
      {"param", param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_)},
      {"code", nullptr}};
  return {{"error", std::move(error)}};
}

}  // namespace grove::serve
