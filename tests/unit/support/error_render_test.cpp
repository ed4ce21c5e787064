// \file error_render_test.cpp
// render_error: the source line and caret of a located error, and the window that a long line is
// cut to (at most kErrorWindow bytes around the caret, "..." on each cut side).
#include <gtest/gtest.h>

#include "support/Error.h"

namespace kintsugi {
namespace {

SourceLoc at(const std::string& text, int line, int col) {
  return SourceLoc{std::make_shared<const SourceFile>(SourceFile{"f.te", text}), line, col};
}

// The two lines after the message: the shown source and the caret line.
std::pair<std::string, std::string> shown(const std::string& rendered) {
  size_t a = rendered.find('\n');
  size_t b = rendered.find('\n', a + 1);
  return {rendered.substr(a + 1, b - a - 1), rendered.substr(b + 1)};
}

TEST(RenderError, ShortLineIsShownWhole) {
  auto [src, caret] = shown(render_error(at("x = 1\ny = @\n", 2, 5), "bad"));
  EXPECT_EQ(src, "y = @");
  EXPECT_EQ(caret, "    ^");
}

TEST(RenderError, LongLineIsCutAroundTheCaret) {
  std::string line(3'000'000, 'a');
  line[1'500'000] = '@';
  std::string r = render_error(at(line, 1, 1'500'001), "bad character");
  EXPECT_LT(r.size(), 400u);
  auto [src, caret] = shown(r);
  EXPECT_EQ(src.substr(0, 3), "...");
  EXPECT_EQ(src.substr(src.size() - 3), "...");
  EXPECT_LE(src.size(), kErrorWindow + 6);
  ASSERT_EQ(caret.back(), '^');
  EXPECT_EQ(src[caret.size() - 1], '@');
}

TEST(RenderError, LongLineCutOnOneSideOnly) {
  std::string line = "@" + std::string(500, 'b');
  auto [src, caret] = shown(render_error(at(line, 1, 1), "here"));
  EXPECT_EQ(src.substr(0, 1), "@");
  EXPECT_EQ(src.substr(src.size() - 3), "...");
  EXPECT_EQ(caret, "^");

  std::string tail = std::string(500, 'b') + "@";
  auto [src2, caret2] = shown(render_error(at(tail, 1, 501), "here"));
  EXPECT_EQ(src2.substr(0, 3), "...");
  EXPECT_EQ(src2.back(), '@');
  EXPECT_EQ(src2[caret2.size() - 1], '@');
}

TEST(RenderError, CaretPastTheEndOfALongLine) {
  std::string line(400, 'c');
  auto [src, caret] = shown(render_error(at(line + "\n", 1, 401), "missing ;"));
  EXPECT_EQ(src.substr(0, 3), "...");
  EXPECT_EQ(caret.size(), src.size() + 1);
}

TEST(RenderError, TabsKeepTheCaretAligned) {
  std::string line = "\t" + std::string(300, 'd') + "@" + std::string(300, 'd');
  auto [src, caret] = shown(render_error(at(line, 1, 302), "here"));
  EXPECT_EQ(src[caret.size() - 1], '@');
}

}  // namespace
}  // namespace kintsugi
