// \file DiskCache.cpp
// The on-disk artifact cache: directory resolution and trust checks, atomic writes, verified
// entries.
//
// Invariant established: see DiskCache.h (payloads are returned only from trusted files in a
// checked directory and when their size and hash match their meta file; writes are atomic).
#include "support/DiskCache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include "support/Error.h"
#include "support/Hash.h"

namespace kintsugi::disk_cache {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Prints `message` on stderr once per process.
void say_once(const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (said.insert(message).second) std::cerr << message << "\n";
}

enum class Trust { Missing, Bad, Ok };

// Reads `path` if it is a regular file (not a symbolic link) owned by the current user and not
// writable by group or others.
Trust read_trusted(const fs::path& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? Trust::Missing : Trust::Bad;
  struct stat st{};
  Trust result = Trust::Ok;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    result = Trust::Bad;
  out->clear();
  char buf[1 << 16];
  while (result == Trust::Ok) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) result = Trust::Bad;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return result;
}

// Removes whatever is at `path` (a directory with its contents, a link itself).
void remove_path(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace

std::string unique_tag() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t seed = std::random_device{}();
  return std::to_string(getpid()) + "-" +
         hex64(seed ^ (counter.fetch_add(1) * 0x9e3779b97f4a7c15ull)).substr(8);
}

bool read_file(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return static_cast<bool>(in) || in.eof();
}

bool write_atomic(const fs::path& dst, std::string_view data) {
  fs::path tmp = dst;
  tmp += ".tmp-" + unique_tag();
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  // 0644 whatever the umask: an entry must not be writable by group or others to be trusted.
  bool ok = fchmod(fd, 0644) == 0;
  for (size_t done = 0; ok && done < data.size();) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n > 0) done += static_cast<size_t>(n);
  }
  ok &= close(fd) == 0;
  if (ok) ok = rename(tmp.c_str(), dst.c_str()) == 0;
  if (!ok) unlink(tmp.c_str());
  return ok;
}

std::string check_dir(const fs::path& dir_in, bool follow_links) {
  fs::path dir = dir_in.lexically_normal();
  if (!dir.has_filename() && dir.has_parent_path()) dir = dir.parent_path();  // trailing '/'
  std::error_code ec;
  if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return "cannot create it (" + errno_text(errno) + ")";
  struct stat st{};
  if ((follow_links ? stat(dir.c_str(), &st) : lstat(dir.c_str(), &st)) != 0)
    return "cannot examine it (" + errno_text(errno) + ")";
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != geteuid())
    return "it is owned by another user (uid " + std::to_string(st.st_uid) + ", not " +
           std::to_string(geteuid()) + ")";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return "it is writable by its group or by others (mode " + octal_mode(st.st_mode) +
           "; chmod go-w it)";
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return "it is not writable (" + errno_text(errno) + ")";
  return "";
}

std::optional<std::string> resolve_dir(const std::string& explicit_dir, std::string_view who) {
  std::string dir = explicit_dir;
  if (dir.empty()) {
    if (const char* env = std::getenv("KINTSUGI_CACHE_DIR"); env && *env) dir = env;
  }
  if (dir.empty()) {
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/')
      dir = std::string(xdg) + "/kintsugi";
  }
  if (dir.empty()) {
    const char* home = std::getenv("HOME");
    if (home && *home) dir = std::string(home) + "/.cache/kintsugi";
  }
  std::string why =
      dir.empty() ? "neither KINTSUGI_CACHE_DIR nor HOME is set" : check_dir(dir, true);
  if (why.empty()) return dir;
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  std::string fallback_why;
  fs::path fallback;
  if (ec) {
    fallback_why = "no temporary directory (" + ec.message() + ")";
  } else {
    fallback = tmp / ("kintsugi-cache-" + std::to_string(geteuid()));
    fallback_why = check_dir(fallback, /*follow_links=*/false);
  }
  std::string primary = dir.empty() ? why : "'" + dir + "': " + why;
  if (fallback_why.empty()) {
    say_once("kintsugi: note: the kernel cache " + primary + "; using " + fallback.string());
    return fallback.string();
  }
  say_once("kintsugi: warning: " + std::string(who) +
           ": compiling without a kernel cache: " + primary + "; " +
           (fallback.empty() ? fallback_why : "'" + fallback.string() + "': " + fallback_why) +
           " (set KINTSUGI_CACHE_DIR to a directory of yours that others cannot write)");
  return std::nullopt;
}

std::string meta_text(std::string_view format, std::string_view key, std::string_view payload) {
  std::ostringstream m;
  m << format << "\nkey " << key << "\nsize " << payload.size() << "\nhash "
    << hex64(fnv1a(payload)) << "\n";
  return m.str();
}

std::optional<std::string> load_entry(const fs::path& payload_path, const fs::path& meta_path,
                                      std::string_view format, std::string_view key) {
  std::string meta, payload;
  Trust m = read_trusted(meta_path, &meta);
  Trust p = read_trusted(payload_path, &payload);
  if (m == Trust::Bad || p == Trust::Bad) {
    remove_entry(payload_path, meta_path);
    return std::nullopt;
  }
  // A payload without its meta file may be a store in progress: a miss, but left alone.
  if (m == Trust::Missing || p == Trust::Missing) return std::nullopt;
  if (meta == meta_text(format, key, payload)) return payload;
  remove_entry(payload_path, meta_path);
  return std::nullopt;
}

bool store_entry(const fs::path& payload_path, const fs::path& meta_path, std::string_view format,
                 std::string_view key, std::string_view payload) {
  return write_atomic(payload_path, payload) &&
         write_atomic(meta_path, meta_text(format, key, payload));
}

void remove_entry(const fs::path& payload_path, const fs::path& meta_path) {
  remove_path(meta_path);
  remove_path(payload_path);
}

}  // namespace kintsugi::disk_cache
