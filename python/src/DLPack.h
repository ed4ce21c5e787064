// \file DLPack.h
// The DLPack C ABI, declared from the public specification (https://dmlc.github.io/dlpack/latest/)
// with only what the Python module uses: the device and data-type descriptors, the tensor, the
// legacy managed tensor (Python capsule "dltensor") and the versioned one (DLPack >= 1.0,
// capsule "dltensor_versioned"), and the capsule names of the Python exchange protocol.
//
// Field order, types and enum values are part of the ABI and follow the specification exactly.
#pragma once

#include <cstdint>

namespace kintsugi::python::dlpack {

// DLDeviceType (a subset: the values are fixed by the specification).
enum DeviceType : int32_t {
  kCPU = 1,
  kCUDA = 2,
  kCUDAHost = 3,
  kOpenCL = 4,
  kVulkan = 7,
  kMetal = 8,
  kVPI = 9,
  kROCM = 10,
  kROCMHost = 11,
  kExtDev = 12,
  kCUDAManaged = 13,
  kOneAPI = 14,
  kWebGPU = 15,
  kHexagon = 16,
  kMAIA = 17,
};

// DLDataTypeCode (the codes up to bool, and the two fp8 codes of DLPack 1.1 Kintsugi stores).
enum TypeCode : uint8_t {
  kInt = 0,
  kUInt = 1,
  kFloat = 2,
  kOpaqueHandle = 3,
  kBfloat = 4,
  kComplex = 5,
  kBool = 6,
  kFloat8_e4m3fn = 10,
  kFloat8_e5m2 = 12,
};

extern "C" {

struct Device {  // DLDevice
  int32_t device_type;
  int32_t device_id;
};

struct DataType {  // DLDataType
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {  // DLTensor
  void* data;    // the first element is at (char*)data + byte_offset
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL means compact row-major
  uint64_t byte_offset;
};

struct ManagedTensor {  // DLManagedTensor
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

struct PackVersion {  // DLPackVersion
  uint32_t major;
  uint32_t minor;
};

struct ManagedTensorVersioned {  // DLManagedTensorVersioned
  PackVersion version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  Tensor dl_tensor;
};

}  // extern "C"

// DLManagedTensorVersioned::flags.
inline constexpr uint64_t kFlagReadOnly = uint64_t{1} << 0;
inline constexpr uint64_t kFlagIsCopied = uint64_t{1} << 1;

// The ABI version this module produces and accepts (major must match).
inline constexpr uint32_t kMajorVersion = 1;
inline constexpr uint32_t kMinorVersion = 0;

// Python capsule names: a producer names the capsule; the consumer renames it once it has taken
// ownership (and then calls the deleter itself), so the capsule's destructor must not.
inline constexpr const char* kCapsuleName = "dltensor";
inline constexpr const char* kUsedCapsuleName = "used_dltensor";
inline constexpr const char* kVersionedCapsuleName = "dltensor_versioned";
inline constexpr const char* kUsedVersionedCapsuleName = "used_dltensor_versioned";

}  // namespace kintsugi::python::dlpack
