// \file Interpreter.h
// The tile interpreter: runs a tile program on host tensors with the reference interpreter's
// semantics, so that a tile program can be checked against the loop program it came from
// (translation validation of translate and the tile passes) without a compiler.
//
// Invariant established: the result is what TileIR.h says the program means: registers start at
// zero in every grid instance, loads past a bounds-checked extent read 0, stores write only
// inside the buffer and where the mask holds, every elementwise operation, cast and reduction
// step follows ir::interpret's arithmetic in the same mode (ScalarEval), a dot accumulates in
// double (exact) or f32 (typed). Anything the tile IR leaves undefined (a squeezed index out of
// range, a load past an extent that is not bounds-checked, a gather index outside the buffer
// where the mask holds) is a RuntimeArgError naming the kernel and the buffer, never a crash.
#pragma once

#include <map>
#include <string>

#include "ir/Interpreter.h"
#include "tile/TileIR.h"

namespace kintsugi::tile {

// Runs `program` at `sizes` (every dim of the source program) on `inputs` (every input buffer);
// the outputs as the reference interpreter returns them. Intermediate buffers start as NaN.
ir::InterpResult interpret(const TileProgram& program, ir::InterpMode mode,
                           const std::map<std::string, const runtime::Tensor*>& inputs,
                           const runtime::SizeMap& sizes, const runtime::ParamMap& params = {});

}  // namespace kintsugi::tile
