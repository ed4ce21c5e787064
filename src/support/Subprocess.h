// \file Subprocess.h
// Work that may not finish, run in a child process under a time limit: the host compiler (a
// shell command) and NVRTC (a library call, which cannot be interrupted inside this process).
//
// Invariant established: run_in_child never waits longer than its time limit (plus the time to
// kill and reap the child); on expiry the child's whole process group is killed and reaped, so
// nothing it started keeps running; what the child wrote to its output descriptor is returned
// whole.
#pragma once

#include <functional>
#include <string>

namespace kintsugi::subprocess {

// The time limit of a compiler run in seconds: $KINTSUGI_COMPILE_TIMEOUT (0: none), default
// 120. A value that is not a non-negative number is a RuntimeArgError.
double compile_timeout();

struct ChildResult {
  int status = -1;         // exit status; 128 if killed by a signal; -1 if it could not start
  bool timed_out = false;  // killed after `timeout` seconds
};

// Forks a child in a process group of its own that runs `child(fd)` and then _exit(0)s; `fd` is
// the write end of a pipe whose bytes land in `*output`. `child` may exec (then its exit status
// is the command's) or call _exit itself. It runs in a copy of this process that holds only the
// forking thread: it must not take locks that another thread of the parent may have held (the
// caller serialises such work), nor use a CUDA context. Waits at most `timeout` seconds (0: no
// limit), then kills the group.
ChildResult run_in_child(const std::function<void(int fd)>& child, std::string* output,
                         double timeout);

// Writes all of `data` to `fd`; false on an error.
bool write_all(int fd, const std::string& data);

}  // namespace kintsugi::subprocess
