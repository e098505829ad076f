// Errors of the OpenAI-compatible API: what a handler throws for a bad request, and the error
// object every client library understands:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens",
//              "code": null}}
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace grove::serve {

class ApiError : public std::runtime_error {
 public:
  // status: the HTTP status (400 bad request, 401, 404, 413, 503, 500); type: OpenAI's error type
  // ("invalid_request_error", "authentication_error", "not_found_error", "server_error", ...);
  // param: the offending field, or empty.
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::string param = "");

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  // The error object above (param and code null when empty).
  nlohmann::json ToJson() const;

 private:
  int status_;
  std::string type_;
  std::string param_;
};

}  // namespace grove::serve
