// \file Files.h
// Reading user-named files safely and writing files atomically.
//
// Invariant established: read_regular_file returns the contents of a regular file of at most
// `max_bytes` bytes, or throws a RuntimeArgError naming the path and what is wrong with it
// (missing, a directory, a device or pipe, too large): it never blocks on a FIFO nor reads an
// endless device. write_file_atomic never follows a symbolic link at its destination and never
// leaves a partial file there: it writes a temporary file beside it, then renames it over the
// destination.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kintsugi::files {

// The largest .te source that is read (16 MiB).
inline constexpr size_t kMaxSourceBytes = size_t{16} << 20;

// Reads the regular file `path` whole. `what` names what the file should be, e.g. "a .te source"
// (used in the messages). Throws RuntimeArgError when the path does not exist, is not readable,
// is not a regular file (a directory, a device, a FIFO, a socket), or holds more than
// `max_bytes` bytes.
std::string read_regular_file(const std::string& path, std::string_view what, size_t max_bytes);

// Writes `data` to `path` atomically: a new temporary file in the same directory (created with
// O_EXCL | O_NOFOLLOW, mode 0666 & ~umask), then rename over `path`. A symbolic link at `path` is
// replaced, not followed; a directory at `path` is an error. Throws RuntimeArgError on failure,
// with `what` naming the option (e.g. "--save-io").
void write_file_atomic(const std::string& path, std::string_view data, std::string_view what);

}  // namespace kintsugi::files
