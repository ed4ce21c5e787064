// \file Lexer.cpp
// The .te tokenizer (see Lexer.h).
#include "te/Lexer.h"

#include <cctype>

namespace kintsugi::te {

const char* token_description(Tok kind) {
  switch (kind) {
    case Tok::End:
      return "end of file";
    case Tok::Newline:
      return "end of line";
    case Tok::Name:
      return "a name";
    case Tok::Int:
      return "an integer";
    case Tok::Float:
      return "a number";
    case Tok::LParen:
      return "'('";
    case Tok::RParen:
      return "')'";
    case Tok::LBracket:
      return "'['";
    case Tok::RBracket:
      return "']'";
    case Tok::Comma:
      return "','";
    case Tok::Colon:
      return "':'";
    case Tok::Assign:
      return "'='";
    case Tok::Plus:
      return "'+'";
    case Tok::Minus:
      return "'-'";
    case Tok::Star:
      return "'*'";
    case Tok::Slash:
      return "'/'";
    case Tok::Percent:
      return "'%'";
    case Tok::Lt:
      return "'<'";
    case Tok::Le:
      return "'<='";
    case Tok::Gt:
      return "'>'";
    case Tok::Ge:
      return "'>='";
    case Tok::EqEq:
      return "'=='";
    case Tok::Ne:
      return "'!='";
    case Tok::AndAnd:
      return "'&&'";
    case Tok::OrOr:
      return "'||'";
    case Tok::Bang:
      return "'!'";
  }
  return "?";
}

std::vector<Token> lex(const std::shared_ptr<const SourceFile>& file) {
  const std::string& s = file->text;
  std::vector<Token> out;
  int line = 1, col = 1;
  size_t i = 0;
  int depth = 0;  // bracket/paren nesting: newlines inside are not statement ends
  auto loc_here = [&]() { return SourceLoc{file, line, col}; };
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
      if (s[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  };
  auto push = [&](Tok kind, size_t len, SourceLoc loc) {
    out.push_back(Token{kind, s.substr(i, len), loc});
    advance(len);
  };
  while (i < s.size()) {
    char c = s[i];
    SourceLoc loc = loc_here();
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') advance(1);
      continue;
    }
    if (c == '\n') {
      if (depth == 0 && !out.empty() && out.back().kind != Tok::Newline)
        out.push_back(Token{Tok::Newline, "\n", loc});
      advance(1);
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      advance(1);
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t n = 1;
      while (i + n < s.size() &&
             (std::isalnum(static_cast<unsigned char>(s[i + n])) || s[i + n] == '_'))
        ++n;
      push(Tok::Name, n, loc);
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t n = 0;
      bool is_float = false;
      while (i + n < s.size() && std::isdigit(static_cast<unsigned char>(s[i + n]))) ++n;
      if (i + n < s.size() && s[i + n] == '.') {
        is_float = true;
        ++n;
        while (i + n < s.size() && std::isdigit(static_cast<unsigned char>(s[i + n]))) ++n;
      }
      if (i + n < s.size() && (s[i + n] == 'e' || s[i + n] == 'E')) {
        size_t m = n + 1;
        if (i + m < s.size() && (s[i + m] == '+' || s[i + m] == '-')) ++m;
        if (i + m < s.size() && std::isdigit(static_cast<unsigned char>(s[i + m]))) {
          is_float = true;
          n = m;
          while (i + n < s.size() && std::isdigit(static_cast<unsigned char>(s[i + n]))) ++n;
        }
      }
      if (i + n < s.size() &&
          (std::isalpha(static_cast<unsigned char>(s[i + n])) || s[i + n] == '_'))
        user_error_at(loc) << "malformed number '" << s.substr(i, n + 1)
                           << "': a number cannot run into a name";
      push(is_float ? Tok::Float : Tok::Int, n, loc);
      continue;
    }
    auto two = [&](char a, char b) { return c == a && i + 1 < s.size() && s[i + 1] == b; };
    if (two('<', '=')) {
      push(Tok::Le, 2, loc);
      continue;
    }
    if (two('>', '=')) {
      push(Tok::Ge, 2, loc);
      continue;
    }
    if (two('=', '=')) {
      push(Tok::EqEq, 2, loc);
      continue;
    }
    if (two('!', '=')) {
      push(Tok::Ne, 2, loc);
      continue;
    }
    if (two('&', '&')) {
      push(Tok::AndAnd, 2, loc);
      continue;
    }
    if (two('|', '|')) {
      push(Tok::OrOr, 2, loc);
      continue;
    }
    Tok kind = Tok::End;
    switch (c) {
      case '(':
        kind = Tok::LParen;
        ++depth;
        break;
      case ')':
        kind = Tok::RParen;
        depth = depth > 0 ? depth - 1 : 0;
        break;
      case '[':
        kind = Tok::LBracket;
        ++depth;
        break;
      case ']':
        kind = Tok::RBracket;
        depth = depth > 0 ? depth - 1 : 0;
        break;
      case ',':
        kind = Tok::Comma;
        break;
      case ':':
        kind = Tok::Colon;
        break;
      case '=':
        kind = Tok::Assign;
        break;
      case '+':
        kind = Tok::Plus;
        break;
      case '-':
        kind = Tok::Minus;
        break;
      case '*':
        kind = Tok::Star;
        break;
      case '/':
        kind = Tok::Slash;
        break;
      case '%':
        kind = Tok::Percent;
        break;
      case '<':
        kind = Tok::Lt;
        break;
      case '>':
        kind = Tok::Gt;
        break;
      case '!':
        kind = Tok::Bang;
        break;
      case '&':
      case '|':
        user_error_at(loc) << "unexpected '" << c << "'; did you mean '" << c << c << "'?";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x80 || !std::isprint(static_cast<unsigned char>(c)))
          user_error_at(loc) << "unexpected character (byte 0x" << std::hex
                             << static_cast<int>(static_cast<unsigned char>(c))
                             << "); .te sources are plain ASCII";
        user_error_at(loc) << "unexpected character '" << c << "'";
    }
    push(kind, 1, loc);
  }
  // The end of the input is located just after its last token, where a missing piece belongs.
  SourceLoc end = loc_here();
  if (!out.empty()) {
    const Token& last = out.back();
    end = last.loc;
    end.col += static_cast<int>(last.kind == Tok::Newline ? 0 : last.text.size());
  }
  if (!out.empty() && out.back().kind != Tok::Newline)
    out.push_back(Token{Tok::Newline, "\n", end});
  out.push_back(Token{Tok::End, "", end});
  return out;
}

}  // namespace kintsugi::te
