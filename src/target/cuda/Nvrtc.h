// \file Nvrtc.h
// CUDA C++ -> PTX and cubin with NVRTC: the embedded device headers are handed to every compile,
// ptxas reports its resources, and results are cached on disk.
//
// NVRTC runs in a child process under the compile time limit, $KINTSUGI_COMPILE_TIMEOUT seconds
// (default 120; 0: none), as the CPU back end's host compiler does: on expiry the child is killed
// and compile_cuda throws a RuntimeArgError (exit code 1) that says how to raise the limit.
//
// Options always passed: -std=c++17 --gpu-architecture=<arch> --minimal --no-cache
// --ptxas-options=-v, then --use_fast_math and -lineinfo when asked, then NvrtcOptions::extra.
// No include path is passed: a source can include only the device headers
// ("kintsugi/<file>.cuh", see DeviceHeaders.h).
//
// Disk cache: <cache dir>/<key>.cumodule and <key>.cumodule.meta, in the directory the CPU back
// end uses (NvrtcOptions::cache_dir, else as disk_cache::resolve_dir says: $KINTSUGI_CACHE_DIR,
// $XDG_CACHE_HOME/kintsugi, ~/.cache/kintsugi; entries trusted only as DiskCache.h says; no
// cache, with a warning, when no directory passes its checks). The key
// is FNV-1a 64 of the program name, the arch, the full option list, the NVRTC library version,
// the toolkit version found at build time, device_headers_hash() and the source.
//
// Invariant established: a CompiledModule holds the PTX, cubin and log that NVRTC produced for
// exactly the inputs its key names, either from this compile or from a cache entry whose size and
// content hash match its meta file; its resources come from that log, and the report names every
// entry function of the PTX (checked: a report that does not is an internal error, so a change in
// NVRTC's log format cannot hide spills).
#pragma once

#include <string>
#include <vector>

#include "support/Error.h"
#include "target/cuda/PtxasLog.h"

namespace kintsugi::cuda {

// NVRTC rejected a source (front-end error, ptxas error, resource limit). The message and log()
// carry NVRTC's log. An InternalError: sources come from Kintsugi's code generator, so a source
// that does not compile is Kintsugi's bug.
class CudaCompileError : public InternalError {
 public:
  CudaCompileError(const std::string& message, std::string log)
      : InternalError(message), log_(std::move(log)) {}
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

struct NvrtcOptions {
  bool fast_math = false;          // --use_fast_math (approximate division and math, ftz)
  bool line_info = false;          // -lineinfo (source lines for profilers)
  std::vector<std::string> extra;  // further NVRTC options, verbatim (e.g. "--maxrregcount=128")
  std::string cache_dir;           // empty: $KINTSUGI_CACHE_DIR, else ~/.cache/kintsugi
  bool use_cache = true;           // false: always compile; the cache is neither read nor written
};

struct CompiledModule {
  std::string name;         // the program name NVRTC's messages use
  std::string arch;         // e.g. "sm_80", "sm_90a"
  std::string ptx;          // text
  std::string cubin;        // bytes, for cuda::Module
  std::string log;          // NVRTC's program log: front-end messages and the ptxas report
  PtxasReport resources;    // parsed from `log`
  std::string cache_key;    // 16 hex digits
  bool from_cache = false;  // read from the disk cache instead of compiled
  double seconds = 0.0;     // wall time of compile_cuda, cache lookup included
};

// True when Kintsugi was built with NVRTC (the CUDA toolkit was found at configure time).
bool nvrtc_available();

// The NVRTC library's version, "major.minor". Throws RuntimeArgError when !nvrtc_available().
std::string nvrtc_version();

// Compiles `source` for `arch` ("sm_80", "sm_90a", or any sm_<N>[a] this NVRTC supports).
// Throws RuntimeArgError for an arch NVRTC does not support or when NVRTC is not available, and
// CudaCompileError when NVRTC rejects the source.
CompiledModule compile_cuda(const std::string& source, const std::string& name,
                            const std::string& arch, const NvrtcOptions& options = {});

}  // namespace kintsugi::cuda
