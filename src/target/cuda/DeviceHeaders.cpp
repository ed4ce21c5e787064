// \file DeviceHeaders.cpp
// Access to the embedded device headers and their hash.
//
// Invariant established: see DeviceHeaders.h; the table itself is generated at build time
// (DeviceHeaders.gen.cpp in the build tree).
#include "target/cuda/DeviceHeaders.h"

#include "support/Hash.h"

namespace kintsugi::cuda {

namespace detail {
extern const DeviceHeader kEmbeddedDeviceHeaders[];
extern const size_t kEmbeddedDeviceHeaderCount;
}  // namespace detail

std::span<const DeviceHeader> device_headers() {
  return {detail::kEmbeddedDeviceHeaders, detail::kEmbeddedDeviceHeaderCount};
}

uint64_t device_headers_hash() {
  static const uint64_t hash = [] {
    uint64_t h = kFnv1aOffset;
    for (const DeviceHeader& header : device_headers()) {
      // The terminating zeros keep ("ab", "c") and ("a", "bc") apart.
      h = fnv1a(header.name, h);
      h = fnv1a("", 1, h);
      h = fnv1a(header.contents, h);
      h = fnv1a("", 1, h);
    }
    return h;
  }();
  return hash;
}

}  // namespace kintsugi::cuda
