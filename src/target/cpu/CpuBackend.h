// \file CpuBackend.h
// The CPU back end: loop IR -> one C++ translation unit -> host compiler -> shared object ->
// dlopen.
//
// Invariant established: a CpuKernel computes exactly what the typed reference interpreter
// computes for its LoopProgram (same rounding after every f16/bf16 operation and store, floor
// integer division, NaN-propagating min/max, lazy select), and never crashes on bad input: an
// integer division by zero or an out-of-bounds computed index makes run() throw a
// RuntimeArgError with the kernel's message instead of reading or writing out of bounds.
//
// Generated code ABI (see generate_source):
//   extern "C" int kintsugi_entry(void* const* buffers,  // inputs and outputs,
//   LoopProgram::buffers
//                                                        // order, intermediates excluded
//                                 const int64_t* sizes,   // LoopProgram::dims order
//                                 const double* params,   // LoopProgram::params order
//                                 char* err, int64_t err_len);  // returns 0 on success
//   extern "C" int kintsugi_start_threads(void);  // starts the team (its size); called once loaded
// Intermediate buffers are allocated (uninitialised) by the generated code. Top-level loop nests
// whose outer loops only drive spatial iteration variables run under OpenMP
// (`parallel for collapse(n)`), as do loops of kind ForKind::Parallel.
//
// Disk cache: <cache_dir>/<key>.so + <key>.meta (+ <key>.cpp for reading), key = FNV-1a 64 of the
// source, the flags and the compiler's version line, in the directory disk_cache::resolve_dir
// checks (owned by the user, not writable by others). A cached object is used only if it is a
// regular file of ours that others cannot write and its size and content hash match the meta
// file; anything else is deleted and rebuilt. All writes are atomic (unique temporary name, then
// rename). Without a usable cache directory, kernels are compiled in a private temporary
// directory (mkdtemp, mode 0700) and not cached.
//
// The host compiler runs under a time limit: $KINTSUGI_COMPILE_TIMEOUT seconds (default 120; 0:
// none). On expiry its whole process group is killed and compile() throws a RuntimeArgError
// (exit code 1) that says how to raise the limit.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/IndexBounds.h"
#include "ir/Stmt.h"
#include "runtime/Tensor.h"
#include "tile/TileIR.h"

namespace kintsugi::cpu {

struct CompileOptions {
  std::string cache_dir;    // empty: $KINTSUGI_CACHE_DIR, else as disk_cache::resolve_dir says
  std::string cxx = "c++";  // host compiler command (may be e.g. "ccache g++")
  std::vector<std::string> extra_flags;  // appended after the default flags
  bool verbose = false;                  // print the compile command and timing to stderr
};

// The complete C++ translation unit for a program (deterministic: same program, same text).
// Throws InternalError on malformed loop IR (unknown buffer or variable, untyped expression).
std::string generate_source(const ir::LoopProgram& program);
// The C++ translation unit for a program in tile form (same ABI; see TileCodegen.cpp).
std::string generate_tile_source(const tile::TileProgram& program);

class CpuKernel {
 public:
  ~CpuKernel();
  CpuKernel(const CpuKernel&) = delete;
  CpuKernel& operator=(const CpuKernel&) = delete;

  // args: inputs then outputs, in LoopProgram::buffers order (intermediates excluded). Sizes
  // missing from `sizes` fall back to LoopProgram::size_hints; params missing from `params` take
  // their default; names not in the program are ignored. Checks count, dtypes, shapes (against
  // the buffers' shape expressions evaluated on the sizes) and that no two tensors share
  // storage; a failed check or a kernel error (division by zero, index out of bounds) throws
  // RuntimeArgError. Safe to call from several threads at once.
  void run(const std::vector<runtime::Tensor*>& args, const runtime::SizeMap& sizes,
           const runtime::ParamMap& params) const;
  // The same on memory the caller owns, used in place.
  void run_in_place(const std::vector<runtime::TensorRef>& args, const runtime::SizeMap& sizes,
                    const runtime::ParamMap& params) const;

  // Checks the sizes and params as a call does and proves the kernel's integer ranges at them,
  // so that a first call at those values does not (the driver does it at the sizes it compiled
  // for). Bad values are left for the call to report.
  void prove_ranges(const runtime::SizeMap& sizes, const runtime::ParamMap& params) const;

  bool from_cache() const { return from_cache_; }
  double compile_seconds() const { return compile_seconds_; }  // whole compile(), incl. lookup
  const std::string& source() const { return source_; }
  // <cache>/<key>.so, and the cache directory after any fallback; both empty without a cache.
  const std::string& library_path() const { return library_path_; }
  const std::string& cache_dir() const { return cache_dir_; }
  const std::string& cache_key() const { return key_; }  // 16 hex digits

 private:
  friend std::shared_ptr<CpuKernel> compile_source(const ir::LoopProgram&, std::string,
                                                   std::map<std::string, tile::Specialisation>,
                                                   std::map<std::string, tile::Divisibility>,
                                                   std::map<std::string, tile::PartBound>,
                                                   const CompileOptions&);
  CpuKernel() = default;

  using EntryFn = int (*)(void* const*, const int64_t*, const double*, char*, int64_t);
  // A call's sizes and params, checked, by name and in the kernel's argument order.
  struct Bound {
    std::map<std::string, int64_t> dims;
    std::map<std::string, double> params;
    std::vector<int64_t> size_vec;
    std::vector<double> param_vec;
  };
  Bound bind(const runtime::SizeMap& sizes, const runtime::ParamMap& params) const;
  ir::LoopProgram program_;
  std::map<std::string, tile::Specialisation> specialised_;  // tile extents generated for
  std::map<std::string, tile::Divisibility> divisible_;      // divisors the tiles rely on
  std::map<std::string, tile::PartBound> bounded_;           // parts of dimensions read as regions
  void* handle_ = nullptr;
  EntryFn entry_ = nullptr;
  bool from_cache_ = false;
  double compile_seconds_ = 0.0;
  std::string source_, library_path_, cache_dir_, key_;
  mutable ir::ProvenRanges proven_;  // the sizes and params its integer ranges hold at
};

// Generates, compiles (or finds in the disk cache) and loads a kernel. Compiler failures throw
// InternalError with the compiler's output, an expired time limit a RuntimeArgError; an unusable
// cache directory falls back to a per-user directory under the system temp dir, else to no cache
// (with a note or warning on stderr, see DiskCache.h); no writable directory at all for the
// build is a RuntimeArgError.
std::shared_ptr<CpuKernel> compile(const ir::LoopProgram& program,
                                   const CompileOptions& options = {});
// The same for a program in tile form; run() then also checks the specialised dims, the
// divisibility the tiles rely on (TileProgram::divisible) and the parts of dimensions they read
// as regions (TileProgram::bounded).
std::shared_ptr<CpuKernel> compile(const tile::TileProgram& program,
                                   const CompileOptions& options = {});
// Compiles given source for `program` (the two above generate it).
std::shared_ptr<CpuKernel> compile_source(const ir::LoopProgram& program, std::string source,
                                          std::map<std::string, tile::Specialisation> specialised,
                                          std::map<std::string, tile::Divisibility> divisible,
                                          std::map<std::string, tile::PartBound> bounded,
                                          const CompileOptions& options);

}  // namespace kintsugi::cpu
