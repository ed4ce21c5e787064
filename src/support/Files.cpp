// \file Files.cpp
// Bounded reads of regular files and atomic writes (see Files.h).
#include "support/Files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "support/DiskCache.h"
#include "support/Error.h"

namespace kintsugi::files {

namespace {

// What kind of non-regular file a mode describes, for messages.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string mib(size_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

std::string read_regular_file(const std::string& path, std::string_view what, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  Fd f{open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    int err = errno;
    if (err == ENOENT) arg_error << "cannot open '" << path << "': no such file";
    arg_error << "cannot open '" << path << "': " << std::strerror(err);
  }
  struct stat st{};
  if (fstat(f.fd, &st) != 0) arg_error << "cannot read '" << path << "': " << std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    arg_error << "'" << path << "' is " << kind_of(st.st_mode) << ", not " << what
              << " (a regular file is needed)";
  if (static_cast<unsigned long long>(st.st_size) > max_bytes)
    arg_error << "'" << path << "' is too large for " << what << ": " << st.st_size
              << " bytes, at most " << mib(max_bytes) << " are read";
  // Back to blocking reads (a regular file never blocks, but be explicit).
  fcntl(f.fd, F_SETFL, fcntl(f.fd, F_GETFL) & ~O_NONBLOCK);
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(f.fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) arg_error << "cannot read '" << path << "': " << std::strerror(errno);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    // The file may grow while it is read.
    if (out.size() > max_bytes)
      arg_error << "'" << path << "' is too large for " << what << ": more than " << mib(max_bytes)
                << " are not read";
  }
  return out;
}

void write_file_atomic(const std::string& path, std::string_view data, std::string_view what) {
  std::string tmp = path + ".tmp-" + disk_cache::unique_tag();
  {
    Fd f{open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666)};
    if (f.fd < 0) arg_error << what << ": cannot create '" << tmp << "': " << std::strerror(errno);
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = write(f.fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        unlink(tmp.c_str());
        arg_error << what << ": failed writing '" << path << "': " << std::strerror(err);
      }
      done += static_cast<size_t>(n);
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    arg_error << what << ": cannot write '" << path << "': " << std::strerror(err);
  }
}

}  // namespace kintsugi::files
