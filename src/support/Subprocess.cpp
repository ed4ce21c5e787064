// \file Subprocess.cpp
// run_in_child: fork, a pipe read with poll until the deadline, then kill and reap the group.
//
// Invariant established: see Subprocess.h.
#include "support/Subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>

#include "support/Error.h"

namespace kintsugi::subprocess {

double compile_timeout() {
  const char* env = std::getenv("KINTSUGI_COMPILE_TIMEOUT");
  if (!env || !*env) return 120.0;
  std::string text = env;
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(v) || v < 0)
    arg_error << "KINTSUGI_COMPILE_TIMEOUT='" << text
              << "' must be a number of seconds (0 for no limit)";
  return v;
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

ChildResult run_in_child(const std::function<void(int fd)>& child, std::string* output,
                         double timeout) {
  output->clear();
  ChildResult result;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return result;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return result;
  }
  if (pid == 0) {
    setpgid(0, 0);
    close(fds[0]);
    child(fds[1]);
    _exit(0);
  }
  setpgid(pid, pid);  // also here: the group exists before any kill below
  close(fds[1]);
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                           std::chrono::duration<double>(timeout));
  char buf[1 << 16];
  for (;;) {
    int wait_ms = -1;
    if (timeout > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
      if (left.count() <= 0) {
        result.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30));
    }
    pollfd pfd{fds[0], POLLIN, 0};
    int ready = poll(&pfd, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (ready == 0) continue;  // the deadline check above ends the loop
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every process holding the pipe has exited (or closed it)
    output->append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (result.timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // What the child left behind in its group (a compiler driver's children) goes too.
  if (result.timed_out) kill(-pid, SIGKILL);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return result;
}

}  // namespace kintsugi::subprocess
