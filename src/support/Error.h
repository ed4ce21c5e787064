// \file Error.h
// User errors and internal errors, Halide style.
//
// A user error (CompileError, RuntimeArgError) means the input is wrong: the message says what is
// wrong and how to fix it, and the CLI exits with code 1. An internal error means Kintsugi broke
// one of its own invariants: the CLI exits with code 2. Source errors carry a SourceLoc and are
// rendered as `file:line:col: error: message`, then the source line and a caret.
#pragma once

#include <cstddef>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

namespace kintsugi {

// A position in a .te source. `source` is shared so that every node can point back into the text.
struct SourceFile {
  std::string name;
  std::string text;
};

struct SourceLoc {
  std::shared_ptr<const SourceFile> file;
  int line = 0;  // 1-based; 0 means "no location" (programs built through the C++ API)
  int col = 0;   // 1-based
  bool valid() const { return file != nullptr && line > 0; }
};

// The base of every error that the user can fix by changing the input.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// An error in a .te program: rendered with its location.
class CompileError : public UserError {
 public:
  CompileError(SourceLoc loc, std::string message);
  const SourceLoc& loc() const { return loc_; }
  const std::string& message() const { return message_; }

 private:
  SourceLoc loc_;
  std::string message_;
};

// A bad runtime argument or a failed precondition (shape, dtype, size, file): not tied to source.
class RuntimeArgError : public UserError {
 public:
  explicit RuntimeArgError(const std::string& message) : UserError(message) {}
};

// Kintsugi broke one of its own invariants.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

// The most bytes of a source line that render_error shows: a longer line is cut to a window of
// this width around the caret, with "..." marking each cut side.
inline constexpr size_t kErrorWindow = 100;

// Renders `file:line:col: error: message` followed by the source line (or its window of
// kErrorWindow bytes around the column) and a caret under the column.
std::string render_error(const SourceLoc& loc, const std::string& message);

namespace detail {
// Collects a streamed message and throws when destroyed; used by the macros below.
template <typename Thrower>
class ErrorStream {
 public:
  explicit ErrorStream(Thrower thrower) : thrower_(std::move(thrower)) {}
  ErrorStream(const ErrorStream&) = delete;
  ErrorStream& operator=(const ErrorStream&) = delete;
  ~ErrorStream() noexcept(false) { thrower_(stream_.str()); }
  template <typename T>
  ErrorStream& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  Thrower thrower_;
  std::ostringstream stream_;
};

[[noreturn]] void throw_internal(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace kintsugi

// user_error_at(loc) << "message";  throws CompileError at the end of the statement.
#define user_error_at(loc)         \
  ::kintsugi::detail::ErrorStream( \
      [&](const std::string& m) { throw ::kintsugi::CompileError(loc, m); })
// arg_error << "message";  throws RuntimeArgError.
#define arg_error                  \
  ::kintsugi::detail::ErrorStream( \
      [](const std::string& m) { throw ::kintsugi::RuntimeArgError(m); })
// internal_assert(cond) << "context";  throws InternalError when cond is false.
#define internal_assert(cond)                                                              \
  if (!(cond))                                                                             \
  ::kintsugi::detail::ErrorStream([](const std::string& m) {                               \
    ::kintsugi::detail::throw_internal(                                                    \
        __FILE__, __LINE__, "assertion `" #cond "` failed" + (m.empty() ? "" : ": " + m)); \
  })
#define internal_error             \
  ::kintsugi::detail::ErrorStream( \
      [](const std::string& m) { ::kintsugi::detail::throw_internal(__FILE__, __LINE__, m); })
