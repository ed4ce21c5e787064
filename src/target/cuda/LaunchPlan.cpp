// \file LaunchPlan.cpp
// plan_launch, check_operand, grid_blocks, throw_failed_check (LaunchPlan.h).
#include "target/cuda/LaunchPlan.h"

#include <cmath>
#include <cstring>

#include "ir/IndexBounds.h"
#include "ir/Interpreter.h"
#include "ir/Limits.h"
#include "ir/Printer.h"

namespace kintsugi::cuda {

std::string buffer_text(const ir::Buffer& b) {
  return (b.role == ir::BufferRole::Input ? "input " : "output ") + b.name;
}

LaunchPlan plan_launch(const tile::TileProgram& program, const CudaSource& source,
                       const runtime::SizeMap& sizes, const runtime::ParamMap& params, size_t given,
                       ir::ProvenRanges& proven) {
  const ir::LoopProgram& p = program.source;
  LaunchPlan l;
  l.args = KsArgs{};
  if (p.dims.size() > static_cast<size_t>(kMaxDims) ||
      p.params.size() > static_cast<size_t>(kMaxParams))
    arg_error << "kernel " << p.name << " has more sizes or params than the CUDA back end passes";
  for (size_t d = 0; d < p.dims.size(); ++d) {
    auto it = sizes.find(p.dims[d]);
    if (it == sizes.end()) arg_error << "kernel " << p.name << ": no value for size " << p.dims[d];
    l.args.sizes[d] = it->second;
  }
  runtime::ParamMap values;
  for (size_t q = 0; q < p.params.size(); ++q) {
    auto it = params.find(p.params[q].name);
    double v = it != params.end() ? it->second : p.params[q].value;
    DType t = p.params[q].dtype;  // integer params truncate, as in the reference
    if (std::string why = ir::param_value_problem(t, is_int(t) ? std::trunc(v) : v); !why.empty())
      arg_error << "kernel " << p.name << ": param " << p.params[q].name << " = "
                << ir::param_value_text(v) << ": " << why;
    l.args.params[q] = v;
    values[p.params[q].name] = v;
  }
  tile::check_specialised(program.specialised, p.name, sizes, values);
  tile::check_divisible(program.divisible, p.name, sizes, values);
  tile::check_bounded(program.bounded, p.name, sizes, values);
  proven.check(p, sizes, values, p.name, program.int32_division_overrun);
  size_t index = 0;
  for (size_t k = 0; k < p.buffers.size(); ++k) {
    const ir::Buffer& b = p.buffers[k];
    if (source.buffers[k] == BufferSlot::Register) continue;
    if (index >= static_cast<size_t>(kMaxBuffers))
      arg_error << "kernel " << p.name << " has more buffers than the CUDA back end passes";
    if (source.buffers[k] == BufferSlot::Unused) {  // its pointer stays 0
      ++index;
      continue;
    }
    std::vector<int64_t> shape = ir::eval_shape(b.shape, sizes, params);
    int64_t n = runtime::checked_bytes(shape, dtype_bytes(b.dtype), "buffer " + b.name);
    size_t bytes = static_cast<size_t>(std::max<int64_t>(n, dtype_bytes(b.dtype)));
    LaunchPlan::Slot slot{&b, index++, std::move(shape), bytes};
    (b.role == ir::BufferRole::Intermediate ? l.intermediates : l.operands)
        .push_back(std::move(slot));
  }
  if (given != l.operands.size()) {
    std::string names;
    for (const LaunchPlan::Slot& o : l.operands)
      names += (names.empty() ? "" : ", ") + o.buffer->name;
    arg_error << "kernel " << p.name << " takes " << l.operands.size()
              << " tensors (its inputs then outputs, in declaration order: " << names << "), got "
              << given;
  }
  return l;
}

void check_operand(const tile::TileProgram& program, const LaunchPlan& plan, size_t i, DType dtype,
                   const std::vector<int64_t>& shape) {
  const LaunchPlan::Slot& o = plan.operands[i];
  const ir::Buffer& b = *o.buffer;
  if (dtype != b.dtype)
    arg_error << "kernel " << program.source.name << ": the tensor for " << buffer_text(b)
              << " has dtype " << dtype_name(dtype) << ", expected " << dtype_name(b.dtype)
              << "; pass a tensor of dtype " << dtype_name(b.dtype);
  if (shape != o.shape)
    arg_error << "kernel " << program.source.name << ": the tensor for " << buffer_text(b)
              << " has shape " << runtime::shape_string(shape) << ", expected "
              << ir::shape_to_string(b.shape) << " = " << runtime::shape_string(o.shape)
              << " at the sizes of this run";
}

std::vector<int64_t> grid_blocks(const CudaSource& source, const runtime::SizeMap& sizes,
                                 const runtime::ParamMap& params) {
  std::vector<int64_t> blocks(source.launches.size(), 1);
  for (size_t k = 0; k < source.launches.size(); ++k) {
    for (const ir::Expr& e : source.launches[k].grid)
      if (__builtin_mul_overflow(blocks[k], ir::eval_int(e, sizes, params), &blocks[k]) ||
          blocks[k] > 0x7fffffff)
        arg_error << "kernel " << source.launches[k].name << ": grid too large";
    const int64_t per_cta = source.launches[k].instances_per_cta;
    blocks[k] = (blocks[k] + per_cta - 1) / per_cta;
  }
  return blocks;
}

std::vector<TensorMapSpec> tensor_map_specs(const tile::TileProgram& program,
                                            const LaunchPlan& plan, const KernelLaunch& launch) {
  std::vector<TensorMapSpec> specs;
  for (const TensorMapUse& use : launch.tensor_maps) {
    const ir::Buffer* b = &program.source.buffers[use.buffer];
    const LaunchPlan::Slot* slot = nullptr;
    for (const std::vector<LaunchPlan::Slot>* slots : {&plan.operands, &plan.intermediates})
      for (const LaunchPlan::Slot& s : *slots)
        if (s.buffer == b) slot = &s;
    internal_assert(slot) << "tensor map over buffer " << b->name
                          << ", which the run does not pass";
    TensorMapSpec& spec = specs.emplace_back();
    spec.element = b->dtype;
    spec.box = use.box;
    spec.swizzle = use.swizzle_bytes == 128  ? TensorMapSwizzle::B128
                   : use.swizzle_bytes == 64 ? TensorMapSwizzle::B64
                   : use.swizzle_bytes == 32 ? TensorMapSwizzle::B32
                                             : TensorMapSwizzle::None;
    uint64_t stride = static_cast<uint64_t>(dtype_bytes(b->dtype));
    bool empty = false;
    for (auto d = slot->shape.rbegin(); d != slot->shape.rend(); ++d) {
      if (!spec.dims.empty()) spec.strides.push_back(stride);
      spec.dims.push_back(static_cast<uint64_t>(*d));
      stride *= static_cast<uint64_t>(*d);
      empty = empty || *d == 0;
    }
    if (empty) continue;
    spec.address = plan.args.bufs[slot->index];
    const std::string why = tensor_map_unaddressable(spec);
    internal_assert(why.empty()) << "kernel " << launch.name << ": the tensor map of buffer "
                                 << b->name << ": " << why;
  }
  return specs;
}

void throw_failed_check(const tile::TileProgram& program, const CudaSource& source, int code) {
  if (code == 0) return;
  std::string where = code - 1 < static_cast<int>(source.sites.size())
                          ? source.sites[static_cast<size_t>(code - 1)]
                          : std::string("?");
  arg_error << "kernel " << program.source.name << ": an index or integer division failed at "
            << where;
}

}  // namespace kintsugi::cuda
