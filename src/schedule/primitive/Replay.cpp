// \file Replay.cpp
// The replay table (see Replay.h).
#include "schedule/primitive/Replay.h"

#include "support/Error.h"

namespace kintsugi::schedule {

const ReplayTable& replay_table() {
  static const ReplayTable table = {
      {"split", replay_split},
      {"split_groups", replay_split_groups},
      {"distribute", replay_distribute},
      {"reorder", replay_reorder},
      {"fuse", replay_fuse},
      {"merge_reduce_axes", replay_merge_reduce_axes},
      {"merge_map_axes", replay_merge_map_axes},
      {"bind", replay_bind},
      {"compute_inline", replay_compute_inline},
      {"reverse_compute_inline", replay_reverse_compute_inline},
      {"decompose_reduction", replay_decompose_reduction},
      {"move_nest", replay_move_nest},
      {"compute_at", replay_compute_at},
      {"name_term", replay_name_term},
      {"rebase_join", replay_rebase_join},
      {"rfactor", replay_rfactor},
      {"reduce_to_scan", replay_reduce_to_scan},
      {"rolling_update", replay_rolling_update},
      {"split_scan_buffer", replay_split_scan_buffer},
      {"split_k_update", replay_split_k_update},
      {"propagate_mask", replay_propagate_mask},
      {"reverse_compute_at", replay_reverse_compute_at},
      {"recompute", replay_recompute},
      {"recompute_point", replay_recompute_point},
      {"factor_group", replay_factor_group},
      {"cache_read", replay_cache_read},
      {"cache_write", replay_cache_write},
      {"compact_buffer", replay_compact_buffer},
  };
  return table;
}

namespace {

const std::map<ir::Op, std::string>& factor_ops() {
  static const std::map<ir::Op, std::string> ops = {
      {ir::Op::Add, "+"}, {ir::Op::Sub, "-"},   {ir::Op::Mul, "*"},  {ir::Op::Div, "/"},
      {ir::Op::Mod, "%"}, {ir::Op::Min, "min"}, {ir::Op::Max, "max"}};
  return ops;
}

}  // namespace

nlohmann::json factor_json(const ir::Expr& factor) {
  if (factor->op == ir::Op::IntImm) return factor->int_value;
  if (factor->op == ir::Op::Var)
    return {{factor->var_kind == ir::VarKind::Param ? "param" : "dim", factor->name}};
  auto op = factor_ops().find(factor->op);
  internal_assert(op != factor_ops().end() && factor->args.size() == 2)
      << "a split factor is a constant or an integer expression over sizes";
  return {{"op", op->second},
          {"args",
           nlohmann::json::array({factor_json(factor->args[0]), factor_json(factor->args[1])})}};
}

ir::Expr factor_arg(const nlohmann::json& j) {
  if (j.is_number_integer()) return ir::make_int(j.get<int64_t>());
  if (j.contains("dim"))
    return ir::make_var(j.at("dim").get<std::string>(), ir::VarKind::Dim, DType::Int);
  if (j.contains("param"))
    return ir::make_var(j.at("param").get<std::string>(), ir::VarKind::Param, DType::Int);
  std::string name = j.at("op").get<std::string>();
  for (const auto& [op, spelling] : factor_ops())
    if (spelling == name) {
      const nlohmann::json& args = j.at("args");
      return ir::make_binary(op, factor_arg(args.at(0)), factor_arg(args.at(1)));
    }
  throw UserError("schedule trace: unknown operator '" + name + "' in a split factor");
}

}  // namespace kintsugi::schedule
