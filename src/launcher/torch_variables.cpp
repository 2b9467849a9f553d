#include "torch_variables.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace aperture::launcher {

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket() for a free MASTER_PORT failed: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) throw std::runtime_error(std::string("no free TCP port on 127.0.0.1 for MASTER_PORT: ") + std::strerror(saved));
  return ntohs(address.sin_port);
}

std::vector<std::pair<std::string, std::string>> torch_variables(int rank, int ranks, int local_rank, int local_size,
                                                                 int port) {
  std::vector<std::pair<std::string, std::string>> variables{
      {"RANK", std::to_string(rank)},             {"WORLD_SIZE", std::to_string(ranks)},
      {"LOCAL_RANK", std::to_string(local_rank)}, {"LOCAL_WORLD_SIZE", std::to_string(local_size)}};
  if (port > 0) {
    variables.emplace_back("MASTER_ADDR", "127.0.0.1");
    variables.emplace_back("MASTER_PORT", std::to_string(port));
  }
  return variables;
}

}  // namespace aperture::launcher
