// \file TileIR.h
// The tile IR: a scheduled program as a few kernels, each a grid of independent instances whose
// body is serial loops around operations on whole tiles (Neptune's tile level).
//
// A tile value has a dtype and a constant shape (a scalar has shape []). Values are in SSA form:
// every operation defines at most one value, numbered in program order. Per-instance state that
// lives across operations (a running max, an accumulator) is a register: a named tile that
// `read` returns whole and `write` replaces whole (a masked update is a select before the
// write). Global buffers are reached only through `load` and `store` of a region: per buffer
// dimension a start (a scalar expression over the grid and loop variables, dims and params)
// and either a tile axis (the region spans that axis' extent) or none (the dimension is
// squeezed). A load past a buffer's extent reads 0; a store writes only where its mask is true
// and the element is inside the buffer. An access whose index is not a start plus one tile axis
// (a lookup by an index tensor, an index moving along two tile axes or by a modulo) is a
// `gather`: every element's indices are tile values, and one outside the buffer is an error.
//
// Sizes stay symbolic: grid and loop extents, starts and scalars are expressions. Only tile
// extents are numbers; a dimension used as one (the head size) is specialised, and listed in
// TileProgram::specialised, which the runtime checks before launch.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/Stmt.h"

namespace kintsugi::tile {

struct TileType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t elements() const;
};

enum class OpKind : uint8_t {
  Load,       // buffer region -> tile
  Store,      // args: value [, mask]; tile -> buffer region
  Read,       // register -> tile
  Write,      // args: value; tile -> register
  Full,       // scalar expression -> tile of `type.shape` (every element the same)
  Arange,     // scalar, scalar + 1, ... along `axis` of `type.shape`, broadcast along the others
  Map,        // elementwise: ir op (unary, binary, select, min/max) or math call; operands have
              // the result's shape or are scalars (broadcast)
  Cast,       // elementwise conversion to type.dtype (rounds through f16/bf16)
  Broadcast,  // args[0] with axes `dims` (increasing positions in the result) -> type.shape
  Permute,    // result axis k is args[0]'s axis perm[k]
  Dot,        // [M, K] x [K, N] -> [M, N], f32 accumulation
  Reduce,     // reducer along `axis` (removed from the shape)
  Gather,     // element-wise load: args are one integer index per dimension of `buffer` (tiles
              // of type.shape, or scalars), then optionally a bool mask; element e reads
              // buffer[args[0][e], args[1][e], ...]. An index outside the buffer is a run-time
              // error (as in the interpreter) where the mask holds; where it does not, the
              // element is 0 and its indices are not checked (tails the loop program skips)
};

struct TileOp {
  OpKind kind = OpKind::Map;
  int result = -1;  // value id, -1 for Store and Write
  TileType type;    // of the result; for Store, of the stored value
  std::vector<int> args;
  // Load, Store: the region. starts[d] is the first index of buffer dimension d; axis_of_dim[d]
  // is the tile axis spanning it (-1: squeezed). bounds_checked[d]: the region may run past the
  // buffer's extent there (a tail), so loads zero-fill and stores skip those elements.
  std::string buffer;  // also the register name for Read / Write
  std::vector<ir::Expr> starts;
  std::vector<int> axis_of_dim;
  std::vector<bool> bounds_checked;
  // Gather only: index_in_bounds[d] when index d provably lies inside the buffer's extent, so
  // the back ends read it without a check (printed `in bounds`).
  std::vector<bool> index_in_bounds;
  // Load only: the loop of a pipelined stream this load belongs to (set by the pipelining pass).
  std::string stream_loop;
  ir::Expr scalar;  // Full: the value; Arange: the start
  ir::Op op = ir::Op::Add;
  ir::MathFn fn = ir::MathFn::Exp;
  bool is_call = false;   // Map: a math call `fn` rather than `op`
  std::vector<int> dims;  // Broadcast
  std::vector<int> perm;  // Permute
  int axis = 0;           // Arange, Reduce
  ir::Reducer reducer = ir::Reducer::Sum;
};

struct TileStmt;
using TileBody = std::vector<TileStmt>;

enum class StmtKind : uint8_t { Op, For };

struct TileStmt {
  StmtKind kind = StmtKind::Op;
  TileOp op;  // Op
  // For: a serial loop `for var in [min, min + extent)`. pipeline_stages > 1: the loads marked
  // with this loop as their stream are issued that many iterations ahead (double buffering).
  std::string var;
  ir::Expr min, extent;
  int pipeline_stages = 1;
  TileBody body;
};

struct GridAxis {
  std::string var;
  ir::Expr extent;
};

struct Register {
  std::string name;
  TileType type;
  // The serial loop whose body holds the allocation: the register is scratch of one iteration of
  // that loop (the loop program reads no element of it that the same iteration did not write
  // first), and every read and write of it is inside that loop. Empty: it lives for the whole
  // grid instance.
  std::string scope_loop;
};

// One kernel: every grid instance runs `body` independently.
struct Kernel {
  std::string name;
  std::vector<GridAxis> grid;
  std::vector<Register> registers;  // fresh (zeroed) per instance
  TileBody body;
  int num_values = 0;
};

// A size expression used as a tile extent (a dim, or a group of rows such as HQ / HK) and the
// value the kernels were generated for.
struct Specialisation {
  ir::Expr extent;
  int64_t value = 0;
};

// A size expression (or an integer param) and a divisor of it at the sizes (and param values) the
// kernels were generated for: the
// innermost extent of a buffer in memory and the largest power of two up to 16 that divides it (a
// back end may read and write that dimension in aligned runs of that many elements: vector
// loads), or a size E that a tile of T positions flattened over two dimensions relies on, read
// at (r / E, r % E) a run at a time (the translator's within_run): then a multiple of T as well.
struct Divisibility {
  ir::Expr extent;
  int64_t divisor = 1;
};

// A part of a dimension that the tiles read as a region inside the buffer: `part <= whole` at the
// sizes and params of a launch (the first L of a key cache's TMAX positions, read by an index
// given the extent L). The region is read without a test an element wherever the block computes
// (beyond the whole dimension it reads 0, as a tail does), so a launch where the part is longer
// than the dimension is refused before it runs, as an index out of bounds.
struct PartBound {
  ir::Expr part, whole;
  std::string buffer;  // a buffer read so, and its dimension (for the message)
  size_t dim = 0;
};

struct TileProgram {
  ir::LoopProgram source;                             // buffers, dims and params come from here
  std::map<std::string, Specialisation> specialised;  // by the extent's printed form
  std::map<std::string, Divisibility> divisible;      // by the extent's printed form
  std::map<std::string, PartBound> bounded;           // by "part <= whole" printed
  // The sizes (dynamic ones left out) and the values of every param the kernels were generated
  // for: a back end may size resources by them (shared memory for a row's tiles, threads for a
  // grid's instances), never assume them in the code.
  std::map<std::string, int64_t> sizes;
  std::map<std::string, double> params;
  std::vector<Kernel> kernels;  // run in order
  // >= 0: every integer division by a value other than a literal has 32-bit operands at `sizes`
  // with tiles running this far past a loop's end and any param value (ir::divisions_fit_int32),
  // so a back end may divide in 32 bits; a launch checks it again at its sizes. -1: not proven
  // (a dynamic size, or values that may not fit).
  int64_t int32_division_overrun = -1;
  // The target's matrix instructions take dots whose K and N are multiples of this (CUDA: 16;
  // 1: any): pad_dot_extents widens the others it can.
  int64_t dot_multiple = 1;
};

// Proves what int32_division_overrun says for `p` and sets it, the overrun being the largest tile
// extent of any kernel.
void prove_int32_divisions(TileProgram& p);

// Whether `name` is a register (else it is a buffer in memory): an allocation of the source
// program, which translation turns into a register of its kernel. A pass may have dropped the
// register since (nothing read it); it is still no buffer in memory.
bool is_register(const TileProgram& p, const std::string& name);
// Throws RuntimeArgError when a size expression specialised as a tile extent (over dims and integer
// params) takes another value at the run's sizes and params (`sizes` holds every dim, `params`
// every param).
void check_specialised(const std::map<std::string, Specialisation>& specialised,
                       const std::string& kernel, const std::map<std::string, int64_t>& sizes,
                       const std::map<std::string, double>& params);

// Throws RuntimeArgError when a size expression or param that the kernels take to be divisible is
// not at the run's sizes and param values (`params` holds every param).
void check_divisible(const std::map<std::string, Divisibility>& divisible,
                     const std::string& kernel, const std::map<std::string, int64_t>& sizes,
                     const std::map<std::string, double>& params);

// Throws RuntimeArgError when a part of a dimension the kernels read as a region (PartBound) is
// longer than the dimension at the run's sizes and param values (`params` holds every param).
void check_bounded(const std::map<std::string, PartBound>& bounded, const std::string& kernel,
                   const std::map<std::string, int64_t>& sizes,
                   const std::map<std::string, double>& params);

std::string to_string(const TileType& t);
std::string to_string(const TileOp& o);  // one line of the printed form
std::string to_string(const TileProgram& p);

// Checks shapes, dtypes, dot operand ranks, SSA order, that no value read from a register is used
// after a write to it (back ends may alias reads to the register), and that a register scoped to
// a loop is read and written only inside that loop; throws InternalError on a violation.
void verify(const TileProgram& p);

}  // namespace kintsugi::tile
