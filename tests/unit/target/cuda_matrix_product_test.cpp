// A matrix product that translation did not make a dot (a sum over one axis of two broadcast
// tiles that each add an axis the other has) is computed element by element by the CUDA writer,
// and the launch says why it is not on the tensor cores (target/cuda/CudaCodegen.cpp); a product
// with a tile that is not broadcast (a matrix-vector product) is not reported.
#include <gtest/gtest.h>

#include "../tile/TileTestUtil.h"
#include "target/cuda/CudaBackend.h"

using namespace kintsugi;
using namespace kintsugi::tile_test;

namespace {

// sum over axis 2 of broadcast(f32(X[0:4, 0:8]), dims (0, 2)) * B : [4, 4], B either Y[0:4, 0:8]
// broadcast along the first axis (a matrix product) or a [4, 4, 8] tile of its own.
tile::TileProgram product(bool matrix) {
  Builder b;
  int x =
      b.broadcast(b.cast(b.load_x(ir::make_int(0), false), f32({4, 8})), {0, 2}, f32({4, 4, 8}));
  int y = b.broadcast(b.load_y(ir::make_int(0), false), {1, 2}, f32({4, 4, 8}));
  if (!matrix) y = b.exp(y, f32({4, 4, 8}));
  TileOp r;
  r.kind = OpKind::Reduce;
  r.args = {b.map(ir::Op::Mul, {x, y}, f32({4, 4, 8}))};
  r.axis = 2;
  r.type = f32({4, 4});
  b.emit(r);
  return b.program;
}

}  // namespace

TEST(CudaMatrixProduct, ElementwiseMatrixProductIsReported) {
  cuda::CudaSource src =
      cuda::generate_cuda_source(product(true), cuda::CudaTarget::parse("sm_80"));
  ASSERT_EQ(src.launches.size(), 1u);
  EXPECT_FALSE(src.launches[0].tensor_cores);
  EXPECT_NE(src.launches[0].not_tensor_cores.find("matrix product"), std::string::npos)
      << src.launches[0].not_tensor_cores;
}

TEST(CudaMatrixProduct, ProductWithAComputedTileIsNotReported) {
  cuda::CudaSource src =
      cuda::generate_cuda_source(product(false), cuda::CudaTarget::parse("sm_80"));
  ASSERT_EQ(src.launches.size(), 1u);
  EXPECT_EQ(src.launches[0].not_tensor_cores, "");
}
