// \file DeviceHeaders.h
// The device header library (src/target/cuda/device/*.cuh), embedded into the binary at build
// time by EmbedDeviceHeaders.cmake.
//
// Generated CUDA sources include the headers as "kintsugi/<file>.cuh"; compile_cuda hands every
// embedded header to NVRTC under that name, so no include path exists at run time and a kernel
// always compiles against the headers of the binary that generated it.
//
// Invariant established: device_headers() lists every .cuh file of src/target/cuda/device as it
// was at build time, sorted by name; device_headers_hash() changes whenever a name or a byte of
// any header does (it is part of every compiled-module cache key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace kintsugi::cuda {

struct DeviceHeader {
  std::string_view name;      // the include name, "kintsugi/<file>.cuh"
  std::string_view contents;  // the file's bytes
};

std::span<const DeviceHeader> device_headers();

// FNV-1a 64 over every header's name and contents, in device_headers() order.
uint64_t device_headers_hash();

}  // namespace kintsugi::cuda
