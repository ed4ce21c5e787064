// \file Lexer.h
// Tokens of the .te language. Newlines end statements, except inside brackets and parentheses;
// `#` starts a comment that runs to the end of the line.
#pragma once

#include <string>
#include <vector>

#include "support/Error.h"

namespace kintsugi::te {

enum class Tok {
  End,
  Newline,
  Name,
  Int,
  Float,
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Colon,
  Assign,
  Plus,
  Minus,
  Star,
  Slash,
  Percent,
  Lt,
  Le,
  Gt,
  Ge,
  EqEq,
  Ne,
  AndAnd,
  OrOr,
  Bang,
};

struct Token {
  Tok kind = Tok::End;
  std::string text;
  SourceLoc loc;
};

const char* token_description(Tok kind);

// Splits the source into tokens; throws CompileError on a character that starts no token.
std::vector<Token> lex(const std::shared_ptr<const SourceFile>& file);

}  // namespace kintsugi::te
