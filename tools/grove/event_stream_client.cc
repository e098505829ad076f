#include "event_stream_client.h"

#include <httplib.h>

namespace grove::cli {

namespace {

// cpp-httplib names its errors in one word ("Connection"); a user reads a sentence.
std::string TransportError(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "could not connect (nothing listens there, or the host is unreachable)";
    case httplib::Error::ConnectionTimeout:
      return "the connection timed out";
    case httplib::Error::Read:
      return "the connection failed while reading the response (or the read timed out)";
    case httplib::Error::Write:
      return "the connection failed while sending the request";
    default:
      return "HTTP client error: " + httplib::to_string(error);
  }
}

}  // namespace

EventStreamResult PostEventStream(const std::string& host, int port, const std::string& path,
                                  const std::string& json_body,
                                  const std::function<bool(std::string_view data)>& on_data,
                                  const std::string& api_key, int timeout_seconds) {
  httplib::Client client(host, port);
  client.set_read_timeout(timeout_seconds, 0);
  EventStreamResult result;
  std::string buffer;
  bool event_stream = false;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = json_body;
  req.set_header("Content-Type", "application/json");
  if (!api_key.empty()) req.set_header("Authorization", "Bearer " + api_key);
  req.response_handler = [&](const httplib::Response& res) {
    result.status = res.status;
    event_stream = res.get_header_value("Content-Type").rfind("text/event-stream", 0) == 0;
    return true;
  };
  req.content_receiver = [&](const char* bytes, size_t n, uint64_t, uint64_t) {
    if (!event_stream) {
      result.body.append(bytes, n);
      return true;
    }
    buffer.append(bytes, n);
    for (std::size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;  // a comment (keep-alive) or another field
      if (!on_data(std::string_view(event).substr(6))) {
        result.cancelled = true;
        return false;
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  if (!client.send(req, res, error) && !result.cancelled) {
    result.error = TransportError(error);
  }
  return result;
}

EventStreamResult Get(const std::string& host, int port, const std::string& path,
                      const std::string& api_key, int timeout_seconds) {
  httplib::Client client(host, port);
  client.set_read_timeout(timeout_seconds, 0);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  EventStreamResult result;
  const httplib::Result res = client.Get(path, headers);
  if (!res) {
    result.error = TransportError(res.error());
    return result;
  }
  result.status = res->status;
  result.body = res->body;
  return result;
}

}  // namespace grove::cli
