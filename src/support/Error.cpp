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
    int col = loc.col;
    // A very long line (a generated expression) is shown as a window around the column.
    constexpr int kWindow = 80;
    if (src_line.size() > 3 * kWindow) {
      int from = std::max(0, col - 1 - kWindow);
      std::string window = src_line.substr(static_cast<size_t>(from), 2 * kWindow);
      bool cut_end = static_cast<size_t>(from) + window.size() < src_line.size();
      src_line = (from > 0 ? "..." : "") + window + (cut_end ? "..." : "");
      col = col - from + (from > 0 ? 3 : 0);
    }
    out << "\n" << src_line << "\n";
    for (int c = 1; c < col && c <= static_cast<int>(src_line.size()); ++c)
      out << (src_line[c - 1] == '\t' ? '\t' : ' ');
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
