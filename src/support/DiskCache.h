// \file DiskCache.h
// The on-disk cache of compiled artifacts shared by the back ends: where it lives, which
// directories and entries are trusted, atomic writes, and entries checked against a meta file.
//
// Trust. A cached CPU kernel is a shared object that gets loaded into the process, so the cache
// must be writable by the current user only. The directory is $KINTSUGI_CACHE_DIR if set, else
// $XDG_CACHE_HOME/kintsugi, else $HOME/.cache/kintsugi; if that is not usable, the per-user
// $TMPDIR/kintsugi-cache-<uid> (which must not be a symbolic link). A directory is created with
// mode 0700 and used only if it is a directory owned by the current user and not writable by its
// group or others. When none is usable, resolve_dir warns once and returns nullopt: the back ends
// then compile without a cache (a cache only saves time; a run must not fail because of it, and
// must never load what another user could have written).
//
// Invariant established: load_entry returns a payload only if the payload and its meta file are
// regular files (not symbolic links) owned by the current user and not writable by group or others,
// in a directory resolve_dir accepted, and the payload's size and FNV-1a hash equal those its meta
// file records under the same format line and key. Anything else at an entry's paths (a
// directory, a link, a device, a foreign or truncated file, a bad meta file) is removed so that
// the caller rebuilds it. Every write is atomic (unique temporary name in the same directory,
// created exclusively, then rename), so concurrent writers of one key and their readers never see
// a torn file.
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

// Writes `data` to `dst` atomically (temporary file in the same directory, created with O_EXCL
// and mode 0600, then rename; a symbolic link at `dst` is replaced, not followed).
bool write_atomic(const std::filesystem::path& dst, std::string_view data);

// Why `dir` may not hold a cache, or "" if it may: creates it (mode 0700) if missing, then
// requires a directory owned by the current user, not writable by group or others, and writable
// by us. `follow_links`: whether `dir` itself may be a symbolic link (it may not for the shared
// temporary directory's fallback).
std::string check_dir(const std::filesystem::path& dir, bool follow_links);

// The cache directory: `explicit_dir` if non-empty, else $KINTSUGI_CACHE_DIR, else
// $XDG_CACHE_HOME/kintsugi, else $HOME/.cache/kintsugi, if check_dir accepts it; else
// $TMPDIR/kintsugi-cache-<uid> if check_dir accepts it (with a note on stderr, once per process);
// else nullopt, with a warning on stderr (once per process) that starts with `who` (e.g. "CPU
// back end") and says why: the caller then compiles without a cache.
std::optional<std::string> resolve_dir(const std::string& explicit_dir, std::string_view who);

// The meta file's text for a payload: "<format>\nkey <key>\nsize <bytes>\nhash <fnv1a hex>\n".
std::string meta_text(std::string_view format, std::string_view key, std::string_view payload);

// The payload at `payload_path` if both files are trusted (see above) and the meta file equals
// meta_text(format, key, payload); nullopt otherwise. Whatever is at the two paths and is not a
// trusted regular file is removed, and so is an entry whose two files do not match; a trusted
// payload without its meta file (a store in progress) is left alone.
std::optional<std::string> load_entry(const std::filesystem::path& payload_path,
                                      const std::filesystem::path& meta_path,
                                      std::string_view format, std::string_view key);

// Writes the payload, then its meta file, both atomically; false if either cannot be written (the
// cache is then only slower, never wrong: load_entry rejects a payload without its meta file).
bool store_entry(const std::filesystem::path& payload_path, const std::filesystem::path& meta_path,
                 std::string_view format, std::string_view key, std::string_view payload);

// Removes whatever is at the two paths of an entry (a directory with its contents; a symbolic
// link itself, not its target; missing files are not an error).
void remove_entry(const std::filesystem::path& payload_path,
                  const std::filesystem::path& meta_path);

}  // namespace kintsugi::disk_cache
