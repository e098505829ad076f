#include "serve/client_connection.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <system_error>

namespace grove::serve {
namespace {

// A socket address as cpp-httplib names it: the numeric host and the port.
bool NameOf(const sockaddr_storage& address, socklen_t length, std::string* host, int* port) {
  char text[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, text, sizeof(text), nullptr,
                  0, NI_NUMERICHOST) != 0) {
    return false;
  }
  *host = text;
  if (address.ss_family == AF_INET) {
    *port = ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  } else if (address.ss_family == AF_INET6) {
    *port = ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  } else {
    return false;
  }
  return true;
}

bool Matches(int fd, const ConnectionAddresses& want) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  std::string host;
  int port = -1;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      !NameOf(address, length, &host, &port) || port != want.remote_port ||
      host != want.remote_addr) {
    return false;
  }
  length = sizeof(address);
  return getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
         NameOf(address, length, &host, &port) && port == want.local_port &&
         host == want.local_addr;
}

}  // namespace

ClientConnection::ClientConnection(const ConnectionAddresses& addresses) {
  if (addresses.remote_port < 0 || addresses.local_port < 0) return;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    if (Matches(fd, addresses)) {
      fd_ = fd;
      return;
    }
  }
}

bool ClientConnection::Closed() const {
  if (fd_ < 0) return false;
  char byte = 0;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;  // the client sent more (a pipelined request): it is there
  if (n == 0) return true;  // end of stream: it closed its side
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset or broken
}

}  // namespace grove::serve
