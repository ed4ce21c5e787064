// \file Replay.cpp
// The replay table (see Replay.h).
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

const ReplayTable& replay_table() {
  static const ReplayTable table = {
      {"split", replay_split},
      {"reorder", replay_reorder},
      {"fuse", replay_fuse},
      {"bind", replay_bind},
      {"compute_inline", replay_compute_inline},
      {"reverse_compute_inline", replay_reverse_compute_inline},
      {"decompose_reduction", replay_decompose_reduction},
      {"compute_at", replay_compute_at},
      {"reverse_compute_at", replay_reverse_compute_at},
  };
  return table;
}

}  // namespace kintsugi::schedule
