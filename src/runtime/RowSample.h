// \file RowSample.h
// Verification of an instance too large for the exact interpreter, on a sample of its rows.
//
// A program is independent along a size R when each row of its outputs along R is computed from
// the same row of its inputs only: every buffer that has R among its dimensions has it as its
// first, with extent exactly R; every access of such a buffer indexes that dimension by a spatial
// iteration variable of extent R, the same one in every access of the block, and the block
// writes a buffer of R; and R appears in no other expression. Row-wise programs (softmax, the
// norms, cross-entropy with a target per row) are; attention is along its batch. Then the program
// at R = k on k rows of the inputs computes exactly those k rows of the outputs, and the exact
// interpreter can check a large instance on a sample of its rows.
//
// Invariant established: a RowSample's reference rows are what the exact interpreter computes
// for those rows of the whole instance.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/Stmt.h"
#include "runtime/Tensor.h"

namespace kintsugi::runtime {

// The first size of p.dims (in declaration order) along which p is independent; "" if none.
std::string independent_size(const ir::LoopProgram& p);

// `count` rows of `extent` (all of them if there are no more): the first and last few and the
// rest drawn without repetition from a generator seeded with `seed`, in increasing order.
std::vector<int64_t> sample_rows(int64_t extent, int64_t count, uint64_t seed);

// The rows `rows` (along dimension 0) of every tensor of `tensors` whose buffer in p has `size`
// as its first dimension; the others unchanged.
std::map<std::string, Tensor> take_rows(const ir::LoopProgram& p, const std::string& size,
                                        const std::map<std::string, Tensor>& tensors,
                                        const std::vector<int64_t>& rows);

}  // namespace kintsugi::runtime
