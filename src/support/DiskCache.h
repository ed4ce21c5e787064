// \file DiskCache.h
// The on-disk cache of compiled artifacts shared by the back ends: where it lives, atomic writes,
// and entries that are trusted only after their size and content hash match a meta file.
//
// Invariant established: load_entry returns a payload only if its size and FNV-1a hash equal the
// ones its meta file records under the same format line and key; every write is atomic (unique
// temporary name in the same directory, then rename), so concurrent writers of one key and their
// readers never see a torn file.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kintsugi::disk_cache {

// A file-name fragment no other thread or process uses (process id and a counter, mixed with a
// per-process random seed).
std::string unique_tag();

// Reads a whole file; false if it cannot be opened or read.
bool read_file(const std::filesystem::path& path, std::string* out);

// Writes `data` to `dst` atomically (temporary file in the same directory, then rename).
bool write_atomic(const std::filesystem::path& dst, std::string_view data);

// The cache directory: `explicit_dir` if non-empty, else $KINTSUGI_CACHE_DIR, else
// ~/.cache/kintsugi. If that is not writable, a per-user directory under the system temp dir is
// used instead (with a note on stderr, once per process); if neither is writable, an InternalError
// that starts with `who` (e.g. "CUDA back end") is thrown.
std::string resolve_dir(const std::string& explicit_dir, std::string_view who);

// The meta file's text for a payload: "<format>\nkey <key>\nsize <bytes>\nhash <fnv1a hex>\n".
std::string meta_text(std::string_view format, std::string_view key, std::string_view payload);

// The payload at `payload_path` if both files exist and the meta file equals
// meta_text(format, key, payload); nullopt otherwise. An entry whose two files exist but do not
// match is removed, so that the caller rebuilds it.
std::optional<std::string> load_entry(const std::filesystem::path& payload_path,
                                      const std::filesystem::path& meta_path,
                                      std::string_view format, std::string_view key);

// Writes the payload, then its meta file, both atomically; false if either cannot be written (the
// cache is then only slower, never wrong: load_entry rejects a payload without its meta file).
bool store_entry(const std::filesystem::path& payload_path, const std::filesystem::path& meta_path,
                 std::string_view format, std::string_view key, std::string_view payload);

// Removes both files of an entry (missing files are not an error).
void remove_entry(const std::filesystem::path& payload_path,
                  const std::filesystem::path& meta_path);

}  // namespace kintsugi::disk_cache
