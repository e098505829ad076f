// A request's body, read within the server's limit whatever way it is sent. cpp-httplib 0.11
// bounds a body only by its Content-Length header: a chunked upload, a body sent without a length
// (read until the client closes) and a compressed one (Content-Encoding gzip or br, inflated as it
// is read) are appended to the request whatever their size — a 100 MB chunked upload once took
// 2.4 GB of memory for one request. Every handler that takes a body reads it through ReadBody,
// which counts the bytes as they arrive (after inflation) and stops at the limit; the refusal is
// answered on a connection that then closes (SendJsonAndClose), since the rest of the body was
// never read.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "serve/api_error.h"

namespace httplib {
class ContentReader;
struct Request;
struct Response;
}  // namespace httplib

namespace grove::serve {

// The whole body into *body, at most `limit` bytes. Throws ApiError: 413 past the limit, 415 for a
// multipart form or an encoding the server cannot inflate, 400 for a body that could not be read
// (a broken chunked encoding, or a client that stopped sending).
// `res` is the response cpp-httplib gave the handler: where it leaves the status of what it
// refused itself.
void ReadBody(const httplib::Request& req, const httplib::Response& res,
              const httplib::ContentReader& reader, std::size_t limit, std::string* body);

// Sends `body` with `status`, then closes the connection rather than read another request from
// it: what follows on it is the unread rest of a refused body.
void SendJsonAndClose(httplib::Response& res, int status, const nlohmann::json& body);

}  // namespace grove::serve
