// \file Replay.h
// The table from primitive names to replay functions (the trace "instruction traits"). Each
// primitive file defines its entry; this is the only name -> function table of the schedule.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "schedule/Schedule.h"

namespace kintsugi::schedule {

using ReplayFn = std::function<void(Schedule&, const nlohmann::json&)>;
using ReplayTable = std::map<std::string, ReplayFn>;

const ReplayTable& replay_table();

// Replay entries, one per primitive file.
void replay_split(Schedule& s, const nlohmann::json& j);
void replay_split_groups(Schedule& s, const nlohmann::json& j);
void replay_distribute(Schedule& s, const nlohmann::json& j);
void replay_reorder(Schedule& s, const nlohmann::json& j);
void replay_fuse(Schedule& s, const nlohmann::json& j);
void replay_merge_reduce_axes(Schedule& s, const nlohmann::json& j);
void replay_merge_map_axes(Schedule& s, const nlohmann::json& j);
void replay_bind(Schedule& s, const nlohmann::json& j);
void replay_compute_inline(Schedule& s, const nlohmann::json& j);
void replay_reverse_compute_inline(Schedule& s, const nlohmann::json& j);
void replay_decompose_reduction(Schedule& s, const nlohmann::json& j);
void replay_move_nest(Schedule& s, const nlohmann::json& j);
void replay_compute_at(Schedule& s, const nlohmann::json& j);
void replay_name_term(Schedule& s, const nlohmann::json& j);
void replay_rebase_join(Schedule& s, const nlohmann::json& j);
void replay_rfactor(Schedule& s, const nlohmann::json& j);
void replay_reduce_to_scan(Schedule& s, const nlohmann::json& j);
void replay_rolling_update(Schedule& s, const nlohmann::json& j);
void replay_split_scan_buffer(Schedule& s, const nlohmann::json& j);
void replay_split_k_update(Schedule& s, const nlohmann::json& j);
void replay_propagate_mask(Schedule& s, const nlohmann::json& j);
void replay_reverse_compute_at(Schedule& s, const nlohmann::json& j);
void replay_recompute(Schedule& s, const nlohmann::json& j);
void replay_recompute_point(Schedule& s, const nlohmann::json& j);
void replay_factor_group(Schedule& s, const nlohmann::json& j);
void replay_cache_read(Schedule& s, const nlohmann::json& j);
void replay_cache_write(Schedule& s, const nlohmann::json& j);
void replay_compact_buffer(Schedule& s, const nlohmann::json& j);

// A split factor in a trace: a number, or an integer expression over sizes and integer params
// as a tree ({"op": "/", "args": [{"dim": "HQ"}, {"dim": "HK"}]}, {"param": "G"}).
nlohmann::json factor_json(const ir::Expr& factor);
ir::Expr factor_arg(const nlohmann::json& j);

inline LoopRef loop_arg(const nlohmann::json& j) {
  return LoopRef{j.at("block").get<std::string>(), j.at("loop").get<std::string>()};
}
inline nlohmann::json loop_json(const LoopRef& l) {
  return {{"block", l.block}, {"loop", l.var}};
}

}  // namespace kintsugi::schedule
