// \file DiskCache.cpp
// The on-disk artifact cache: directory resolution, atomic writes, verified entries.
//
// Invariant established: see DiskCache.h (payloads are returned only when their size and hash
// match their meta file; writes are atomic).
#include "support/DiskCache.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>

#include "support/Error.h"
#include "support/Hash.h"

namespace kintsugi::disk_cache {

namespace fs = std::filesystem;

namespace {

bool dir_writable(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) return false;
  fs::path probe = dir / (".write-test-" + unique_tag());
  {
    std::ofstream out(probe);
    if (!out) return false;
    out << "ok";
    if (!out) return false;
  }
  fs::remove(probe, ec);
  return true;
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
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, dst, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

std::string resolve_dir(const std::string& explicit_dir, std::string_view who) {
  std::string dir = explicit_dir;
  if (dir.empty()) {
    if (const char* env = std::getenv("KINTSUGI_CACHE_DIR"); env && *env) dir = env;
  }
  if (dir.empty()) {
    const char* home = std::getenv("HOME");
    if (home && *home) dir = std::string(home) + "/.cache/kintsugi";
  }
  if (!dir.empty() && dir_writable(dir)) return dir;
  std::error_code ec;
  fs::path fallback = fs::temp_directory_path(ec) / ("kintsugi-cache-" + std::to_string(getuid()));
  if (!dir_writable(fallback))
    internal_error << who << ": no writable cache directory (tried '" << dir << "' and '"
                   << fallback.string() << "')";
  static std::once_flag noted;
  std::call_once(noted, [&] {
    std::cerr << "kintsugi: note: cache directory '" << dir << "' is not writable; using "
              << fallback.string() << "\n";
  });
  return fallback.string();
}

std::string meta_text(std::string_view format, std::string_view key, std::string_view payload) {
  std::ostringstream m;
  m << format << "\nkey " << key << "\nsize " << payload.size() << "\nhash "
    << hex64(fnv1a(payload)) << "\n";
  return m.str();
}

std::optional<std::string> load_entry(const fs::path& payload_path, const fs::path& meta_path,
                                      std::string_view format, std::string_view key) {
  // A payload without its meta file may be a store in progress: a miss, but left alone.
  std::string meta, payload;
  if (!read_file(meta_path, &meta) || !read_file(payload_path, &payload)) return std::nullopt;
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
  std::error_code ec;
  fs::remove(meta_path, ec);
  fs::remove(payload_path, ec);
}

}  // namespace kintsugi::disk_cache
