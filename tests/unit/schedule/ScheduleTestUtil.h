// Helpers for schedule tests: parse a program, and check that a transformation preserved its
// meaning by running the exact reference interpreter before and after on fresh random inputs,
// at several sizes (tails included); check that a trace replays and that a primitive refuses with a
// given message.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "runtime/Runner.h"
#include "schedule/Schedule.h"
#include "te/Lower.h"
#include "te/Program.h"

namespace schedtest {

using namespace kintsugi;

inline ir::LoopProgram lowered(const std::string& src) {
  te::Program p = te::parse("test.te", src);
  te::check(p);
  return te::lower(p);
}

inline ir::LoopProgram example(const std::string& path) {
  te::Program p = te::parse_file(std::string(KINTSUGI_SOURCE_DIR) + "/examples/" + path);
  te::check(p);
  return te::lower(p);
}

// Runs both programs on the same random inputs for every size binding and compares outputs
// (relative to the largest reference magnitude; NaN/Inf positions must agree).
inline void expect_equivalent(const ir::LoopProgram& before, const ir::LoopProgram& after,
                              const std::vector<runtime::SizeMap>& shapes, uint64_t seed = 1) {
  for (const runtime::SizeMap& shape : shapes) {
    runtime::SizeMap sizes = runtime::bind_sizes(before, shape);
    auto inputs = runtime::random_inputs(before, sizes, seed++);
    std::map<std::string, const runtime::Tensor*> in;
    for (auto& [name, t] : inputs) in[name] = &t;
    auto a = ir::interpret(before, ir::InterpMode::Exact, in, sizes);
    auto b = ir::interpret(after, ir::InterpMode::Exact, in, sizes);
    for (const auto& [name, ref] : a.outputs) {
      const auto& got = b.outputs.at(name).values;
      ASSERT_EQ(got.size(), ref.values.size()) << name;
      double scale = 0, err = 0;
      for (double r : ref.values)
        if (std::isfinite(r)) scale = std::max(scale, std::fabs(r));
      for (size_t k = 0; k < got.size(); ++k) {
        double r = ref.values[k], g = got[k];
        if (!std::isfinite(r) || !std::isfinite(g)) {
          ASSERT_TRUE((std::isnan(r) && std::isnan(g)) || r == g)
              << name << "[" << k << "]: " << r << " vs " << g << " (seed " << seed - 1 << ")\n"
              << ir::to_string(after);
          continue;
        }
        err = std::max(err, std::fabs(r - g));
      }
      EXPECT_LE(err, 1e-9 * std::max(scale, 1.0))
          << name << " differs after scheduling (seed " << seed - 1 << ")\n"
          << ir::to_string(after);
    }
  }
}

// The schedule's trace, replayed on `program`, gives the schedule's program again.
inline void expect_replays(const ir::LoopProgram& program, const schedule::Schedule& s) {
  schedule::Schedule r = schedule::replay(program, nlohmann::json::parse(s.trace().dump()));
  EXPECT_EQ(ir::to_string(r.program()), ir::to_string(s.program()));
}

// `apply` throws a ScheduleError whose message is `message`.
inline void expect_refused(const std::function<void()>& apply, const std::string& message) {
  try {
    apply();
    ADD_FAILURE() << "not refused; expected: " << message;
  } catch (const schedule::ScheduleError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

}  // namespace schedtest
