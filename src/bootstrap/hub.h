// src/bootstrap/hub.h — the rendezvous hub every rank's Team talks to.
//
// One hub serves a job: `aperture launch` runs it inside the launcher (on an abstract Unix
// socket); under torchrun and mpirun rank 0 runs it on a thread (over TCP). Ranks send it
// collective requests (barrier, allgather, broadcast) numbered in call order; once every rank
// has sent request N the hub checks that they agree (same operation, sizes and root) and answers
// all of them. It fails the job, answering every waiting rank with the reason, when:
//   - the requests disagree (names each rank's operation and sizes);
//   - a rank's connection drops before it said goodbye (it crashed or was killed);
//   - some ranks have not arrived within the timeout (names them);
//   - the owner reports a rank's death (report_rank_exit), e.g. the launcher's waitpid.
// A connection that fails the hello (wrong token, other user, bad rank) is dropped and changes
// nothing.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace aperture::detail {

struct HubOptions {
  int world_size = 1;
  std::string token;  // the job token each rank must present (empty: none required)
  std::chrono::milliseconds timeout{60000};
  // "unix" (abstract socket, peer uid checked) or "tcp"; for tcp, bind_host:bind_port
  // (port 0: any free port).
  std::string transport = "unix";
  std::string bind_host = "127.0.0.1";
  int bind_port = 0;
  std::string advertise_host;  // the host name put in address() (default: bind_host)
};

class Hub {
 public:
  explicit Hub(HubOptions options);  // binds and starts serving on a thread
  ~Hub();                            // stops serving, closes every connection
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  // The address ranks connect to: "unix:@name" or "tcp:host:port" (the APERTURE_HUB format).
  std::string address() const;
  // Tells every waiting and future request that `rank` is gone, with `description`
  // (e.g. "rank 3 (pid 123) was killed by signal 9 (SIGKILL)").
  void report_rank_exit(int rank, const std::string& description);
  // Waits until every rank has said goodbye or closed its connection, at most `timeout`; true
  // when all are gone.
  bool wait_all_left(std::chrono::milliseconds timeout);
  // The reason the job failed, or empty.
  std::string failure() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A fresh random job token (hex), for APERTURE_JOB_TOKEN.
std::string make_job_token();

}  // namespace aperture::detail
