// \file Error.cpp
// Rendering of located errors: the location, the message, the source line (a window of it when
// the line is very long) and a caret under the column.
#include "support/Error.h"

#include <algorithm>
#include <sstream>

namespace kintsugi {

CompileError::CompileError(SourceLoc loc, std::string message)
    : UserError(render_error(loc, message)), loc_(std::move(loc)), message_(std::move(message)) {}

std::string render_error(const SourceLoc& loc, const std::string& message) {
  if (!loc.valid()) return "error: " + message;
  std::ostringstream out;
  out << loc.file->name << ":" << loc.line << ":" << loc.col << ": error: " << message;
  // Find the source line and print it with a caret under the column.
  const std::string& text = loc.file->text;
  size_t start = 0;
  for (int line = 1; line < loc.line && start != std::string::npos; ++line) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start != std::string::npos && start <= text.size()) {
    size_t end = text.find('\n', start);
    std::string src_line = text.substr(start, end == std::string::npos ? end : end - start);
    // A long line is cut to a window of kErrorWindow bytes around the caret, with "..." on each
    // cut side, so that one long line does not flood the terminal.
    size_t caret = static_cast<size_t>(std::max(loc.col, 1) - 1);
    caret = std::min(caret, src_line.size());
    size_t lo = 0, hi = src_line.size();
    if (src_line.size() > kErrorWindow) {
      lo = caret > kErrorWindow / 2 ? caret - kErrorWindow / 2 : 0;
      hi = std::min(src_line.size(), lo + kErrorWindow);
      lo = hi - kErrorWindow;
      // Never cut a UTF-8 sequence: move the cuts to the start of a character.
      auto continuation = [&](size_t i) {
        return i < src_line.size() && (static_cast<unsigned char>(src_line[i]) & 0xc0) == 0x80;
      };
      while (lo < caret && continuation(lo)) ++lo;
      while (hi > caret + 1 && continuation(hi)) --hi;
    }
    const std::string prefix = lo > 0 ? "..." : "", suffix = hi < src_line.size() ? "..." : "";
    out << "\n"
        << prefix << src_line.substr(lo, hi - lo) << suffix << "\n"
        << std::string(prefix.size(), ' ');
    for (size_t c = lo; c < caret; ++c) out << (src_line[c] == '\t' ? '\t' : ' ');
    out << "^";
  }
  return out.str();
}

namespace detail {
void throw_internal(const char* file, int line, const std::string& message) {
  std::ostringstream out;
  out << "internal error at " << file << ":" << line << ": " << message;
  throw InternalError(out.str());
}
}  // namespace detail

}  // namespace kintsugi
