// Who may call what: the clients' --api-key opens every endpoint but /health and the tree view's
// page, and the admin key (never the same) opens /admin/ alone, which answers 403 on a server
// started without one. A refusal is sent before the request's body is read, so its connection
// closes after the answer (request_body.h).
#pragma once

#include <string>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace grove::serve {

// The request's Authorization is "Bearer KEY" (false for an empty key), compared in time that
// depends on the lengths only.
bool CarriesKey(const httplib::Request& req, const std::string& key);

// True when the request was refused (401, the answer in res); false lets it through: no key is
// set, the path is public, or the request carries the key (the step feed also as ?key=).
bool RefusedWithoutApiKey(const std::string& api_key, const httplib::Request& req,
                          httplib::Response& res);
// The same for /admin/: 403 when admin_key is empty, 401 without it.
bool RefusedWithoutAdminKey(const std::string& admin_key, const httplib::Request& req,
                            httplib::Response& res);

}  // namespace grove::serve
