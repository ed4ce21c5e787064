// \file Cache.h
// What cache_read and cache_write share: scope validation, fresh buffer/block names, and the
// copy nest that moves a whole buffer into another one.
#pragma once

#include <string>

#include "ir/Stmt.h"
#include "schedule/Schedule.h"

namespace kintsugi::schedule {

// Throws ScheduleError unless scope is "global", "shared" or "local".
void check_cache_scope(const std::string& primitive, const std::string& scope);
// `base`, or base_1, base_2, ...: a name no buffer, block, loop, dim or param has.
std::string fresh_cache_name(const Schedule& s, const std::string& base);
// A root-level nest: block `block` copies every element of `src` into `dst` (same shape).
ir::Stmt copy_nest(const Schedule& s, const std::string& block, const ir::Buffer& src,
                   const std::string& dst);
// The program body as a root Seq and the index of the root statement holding `block`.
size_t root_nest_of(const ir::LoopProgram& p, const std::string& block,
                    const std::string& primitive, ir::StmtNode* root);

}  // namespace kintsugi::schedule
