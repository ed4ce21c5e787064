// \file Printer.h
// A stable, readable text form of expressions, loop IR statements and loop programs.
// The text is what FileCheck tests match, so changes to it are changes to the tests.
#pragma once

#include <string>

#include "ir/Stmt.h"

namespace kintsugi::ir {

// Exact: the text reads back to the same expression (f16 literals keep their cast). Math: integral
// literals without ".0" and literals without casts, for reading repair functions.
enum class ExprStyle { Exact, Math };
std::string to_string(const Expr& e, ExprStyle style = ExprStyle::Exact);
std::string to_string(const Stmt& s, int indent = 0);
std::string to_string(const LoopProgram& p);
// A symbolic shape: "[B, H, S, D]".
std::string shape_to_string(const std::vector<Expr>& shape);
// Shortest text that reads back to the same double ("inf", "-inf", "nan" for the specials).
std::string format_double(double v);

}  // namespace kintsugi::ir
