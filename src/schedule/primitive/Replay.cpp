// \file Replay.cpp
// The replay table (see Replay.h).
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

const ReplayTable& replay_table() {
  static const ReplayTable table = {
      {"split", replay_split},
      {"distribute", replay_distribute},
      {"reorder", replay_reorder},
      {"fuse", replay_fuse},
      {"bind", replay_bind},
      {"compute_inline", replay_compute_inline},
      {"reverse_compute_inline", replay_reverse_compute_inline},
      {"decompose_reduction", replay_decompose_reduction},
      {"move_nest", replay_move_nest},
      {"compute_at", replay_compute_at},
      {"rfactor", replay_rfactor},
      {"reduce_to_scan", replay_reduce_to_scan},
      {"rolling_update", replay_rolling_update},
      {"split_scan_buffer", replay_split_scan_buffer},
      {"split_k_update", replay_split_k_update},
      {"propagate_mask", replay_propagate_mask},
      {"reverse_compute_at", replay_reverse_compute_at},
      {"cache_read", replay_cache_read},
      {"cache_write", replay_cache_write},
      {"compact_buffer", replay_compact_buffer},
  };
  return table;
}

}  // namespace kintsugi::schedule
