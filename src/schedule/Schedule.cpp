// \file Schedule.cpp
// Schedule state, fresh names and trace replay (see Schedule.h). Each primitive lives in
// src/schedule/primitive/<name>.cpp together with its errors and its replay entry.
#include "schedule/Schedule.h"

#include <functional>
#include <map>

#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

Schedule::Schedule(ir::LoopProgram program) : program_(std::move(program)) {}

std::vector<std::string> Schedule::primitive_names() const {
  std::vector<std::string> out;
  for (const auto& step : trace_) out.push_back(step.at("primitive").get<std::string>());
  return out;
}

void Schedule::commit(ir::LoopProgram program, nlohmann::json entry) {
  program_ = std::move(program);
  trace_.push_back(std::move(entry));
}

std::string Schedule::fresh_name(const std::string& base) const {
  std::set<std::string> taken = all_loop_vars(program_.body);
  for (const std::string& b : all_block_names(program_.body)) taken.insert(b);
  for (const ir::Buffer& b : program_.buffers) taken.insert(b.name);
  for (const std::string& d : program_.dims) taken.insert(d);
  for (const ir::Param& q : program_.params) taken.insert(q.name);
  if (!taken.count(base)) return base;
  for (int k = 1;; ++k) {
    std::string candidate = base + "_" + std::to_string(k);
    if (!taken.count(candidate)) return candidate;
  }
}

Schedule replay(const ir::LoopProgram& program, const nlohmann::json& trace) {
  Schedule s(program);
  if (!trace.is_array())
    throw ScheduleError("replay", "a trace is a JSON list of primitive applications");
  for (const auto& step : trace) {
    if (!step.is_object() || !step.contains("primitive") || !step["primitive"].is_string())
      throw ScheduleError("replay", "trace entry " + step.dump() + " has no \"primitive\" name");
    std::string name = step["primitive"].get<std::string>();
    const ReplayTable& table = replay_table();
    auto it = table.find(name);
    if (it == table.end()) throw ScheduleError("replay", "unknown primitive '" + name + "'");
    try {
      it->second(s, step);
    } catch (const nlohmann::json::exception& e) {
      throw ScheduleError(name,
                          std::string("bad trace arguments ") + step.dump() + ": " + e.what());
    }
  }
  return s;
}

}  // namespace kintsugi::schedule
