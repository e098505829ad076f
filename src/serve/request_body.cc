#include "serve/request_body.h"

#include <httplib.h>

#include <memory>

#include "base/error.h"
#include "serve/api_response.h"

namespace grove::serve {

void ReadBody(const httplib::Request& req, const httplib::Response& res,
              const httplib::ContentReader& reader, std::size_t limit, std::string* body) {
  // cpp-httplib hands a multipart form to callbacks this reader does not have (an exception
  // deep inside it); the API takes JSON only.
  if (req.is_multipart_form_data()) {
    throw ApiError(415,
                   "the request body must be JSON (Content-Type: application/json), not a "
                   "multipart form");
  }
  body->clear();
  bool over_limit = false;
  const bool read = reader([&](const char* data, std::size_t n) {
    if (n > limit - body->size()) {
      over_limit = true;
      return false;
    }
    body->append(data, n);
    return true;
  });
  if (read) return;
  // What cpp-httplib refused itself is in res.status: 413 for a Content-Length above the limit
  // (that body never reaches the receiver), 415 for an encoding it cannot inflate, 400 for a
  // broken one.
  const int status = over_limit ? 413 : res.status;
  if (status == 413) {
    throw ApiError(
        413, StrCat("the request body is too large: this server takes at most ", limit, " bytes"));
  }
  if (status == 415) {
    throw ApiError(415, "Content-Encoding '" + req.get_header_value("Content-Encoding") +
                            "' is not supported (gzip, deflate and br are)");
  }
  throw ApiError(400,
                 "the request body could not be read (a broken chunked or compressed encoding, or "
                 "the client stopped sending)");
}

void SendJsonAndClose(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_header("Connection", "close");
  // cpp-httplib 0.11 has no call that closes a connection from a handler, but it closes one whose
  // content provider reports a failure: this one writes the whole body, then reports one.
  auto text = std::make_shared<const std::string>(ResponseText(body));
  res.set_content_provider(text->size(), "application/json",
                           [text](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                             sink.write(text->data() + offset, length);
                             return false;
                           });
}

}  // namespace grove::serve
