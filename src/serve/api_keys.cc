#include "serve/api_keys.h"

#include <httplib.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/request_body.h"

namespace grove::serve {
namespace {

// Compares a key a client sent with the server's in time that depends on their lengths only, so
// that the time of a refusal does not tell how much of a guess was right.
bool SameKey(const std::string& sent, const std::string& key) {
  unsigned char differ = sent.size() == key.size() ? 0 : 1;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    differ |= static_cast<unsigned char>(sent[i] ^ key[i % std::max<std::size_t>(key.size(), 1)]);
  }
  return differ == 0;
}

}  // namespace

bool CarriesKey(const httplib::Request& req, const std::string& key) {
  return !key.empty() && SameKey(req.get_header_value("Authorization"), "Bearer " + key);
}

bool RefusedWithoutAdminKey(const std::string& admin_key, const httplib::Request& req,
                            httplib::Response& res) {
  // Refused before the body is read: the connection closes after the answer.
  if (admin_key.empty()) {
    SendJsonAndClose(
        res, 403,
        ApiError(403, "the admin endpoints are off: start the server with --admin-key KEY",
                 "permission_error")
            .ToJson());
    return true;
  }
  if (CarriesKey(req, admin_key)) return false;
  SendJsonAndClose(res, 401,
                   ApiError(401, "a valid admin key is required (Authorization: Bearer KEY)",
                            "authentication_error")
                       .ToJson());
  return true;
}

bool RefusedWithoutApiKey(const std::string& api_key, const httplib::Request& req,
                          httplib::Response& res) {
  // Everything that renders, runs or tells about requests needs the key; only the health check
  // and the tree view's page (static HTML; what it fetches needs the key) do not, as llama-server
  // leaves /health open.
  if (api_key.empty() || req.path == "/health" || req.path == "/") return false;
  // The page's EventSource cannot send headers: the step feed also takes ?key=.
  if (CarriesKey(req, api_key) ||
      (req.path == "/v1/steps" && SameKey(req.get_param_value("key"), api_key))) {
    return false;
  }
  // The body of a refused request is not read: the connection closes after the answer.
  SendJsonAndClose(res, 401,
                   ApiError(401, "a valid API key is required (Authorization: Bearer KEY)",
                            "authentication_error")
                       .ToJson());
  return true;
}

}  // namespace grove::serve
