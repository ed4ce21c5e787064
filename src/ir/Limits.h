// \file Limits.h
// The size limits of a program and the value ranges of params, in one place.
//
// Invariant: a program that passes te::check() has no tensor of rank above kMaxRank, no more than
// kMaxDefinitions definitions, and every param holds a value of its declared type's range (see
// param_value_problem), so that compiled kernels and the reference interpreter see the same value.
// Every expression is at most kMaxExprDepth operations deep: the parser refuses deeper ones while
// it builds them (te/Parser.cpp), te::check() refuses deeper ones built in C++, so that every
// recursive pass after them runs in bounded stack space.
#pragma once

#include <string>

#include "ir/DType.h"

namespace kintsugi::ir {

// Operations from the root of one expression to its deepest leaf.
constexpr int kMaxExprDepth = 1000;
// Levels of parentheses, calls, brackets and unary operators the parser descends into.
constexpr int kMaxExprNesting = 256;
// Operations (nodes with operands) in one program, all of its expressions together. Real operators
// have a few hundred; compile time grows with this count (a program of 25,000 operations takes
// 14 s to generate its CPU source), so this keeps the worst case in seconds.
constexpr int kMaxProgramOps = 20000;
// Rank of any tensor (input, definition, declared shape) and axes of one reduction.
constexpr int kMaxRank = 16;
// Definitions (outputs included) in one program. Real operators have a dozen; the auto-scheduler's
// fusion analysis grows faster than the square of the block count (a chain of 100 definitions
// with reductions schedules in 0.7 s, one of 196 in 12 s), so 128 keeps compilation in seconds.
constexpr int kMaxDefinitions = 128;

// Why `value` cannot be the value of a param of type `type`, or "" when it can:
// integer params need an integer within the type's range (i32: [-2^31, 2^31 - 1], i8:
// [-128, 127]); float params may not be NaN, and a finite value must stay finite once rounded to
// the type (f16 up to 65504, bf16 and f32 up to about 3.4e38); +-inf is allowed as it is.
std::string param_value_problem(DType type, double value);
// A param value as messages print it: integers exactly (4294967296), others with %.17g.
std::string param_value_text(double value);

}  // namespace kintsugi::ir
