// \file PtxasLog.cpp
// Line-by-line parser of the ptxas -v report in an NVRTC log (format in PtxasLog.h).
//
// Invariant established: see PtxasLog.h.
#include "target/cuda/PtxasLog.h"

#include <cctype>
#include <optional>

namespace kintsugi::cuda {

namespace {

// The decimal number that ends right before `suffix` in `line` ("Used 24 registers" with suffix
// " registers" gives 24).
std::optional<int64_t> number_before(std::string_view line, std::string_view suffix) {
  size_t end = line.find(suffix);
  if (end == std::string_view::npos) return std::nullopt;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  if (begin == end) return std::nullopt;
  int64_t value = 0;
  for (size_t i = begin; i < end; ++i) value = value * 10 + (line[i] - '0');
  return value;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The text after `marker` in `line`, trimmed; nullopt if `marker` is absent.
std::optional<std::string_view> after(std::string_view line, std::string_view marker) {
  size_t at = line.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  return trim(line.substr(at + marker.size()));
}

}  // namespace

const FunctionResources* PtxasReport::find(std::string_view name) const {
  for (const FunctionResources& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

PtxasReport parse_ptxas_log(std::string_view log) {
  PtxasReport report;
  auto function = [&](std::string_view name) -> size_t {
    for (size_t i = 0; i < report.functions.size(); ++i)
      if (report.functions[i].name == name) return i;
    report.functions.push_back({.name = std::string(name)});
    return report.functions.size() - 1;
  };
  std::optional<size_t> entry, properties;  // the function the next lines describe
  while (!log.empty()) {
    size_t eol = log.find('\n');
    std::string_view line = log.substr(0, eol);
    log.remove_prefix(eol == std::string_view::npos ? log.size() : eol + 1);
    if (auto warning = after(line, "ptxas warning :")) {
      report.warnings.emplace_back(*warning);
    } else if (auto rest = after(line, "Compiling entry function '")) {
      entry = function(rest->substr(0, rest->find('\'')));
      report.functions[*entry].entry = true;
    } else if (auto name = after(line, "Function properties for ")) {
      properties = function(*name);
    } else if (auto stack = number_before(line, " bytes stack frame"); stack && properties) {
      FunctionResources& f = report.functions[*properties];
      f.stack_frame_bytes = *stack;
      f.spill_store_bytes = number_before(line, " bytes spill stores").value_or(0);
      f.spill_load_bytes = number_before(line, " bytes spill loads").value_or(0);
    } else if (auto registers = number_before(line, " registers"); registers && entry) {
      FunctionResources& f = report.functions[*entry];
      f.registers = static_cast<int>(*registers);
      f.barriers = static_cast<int>(number_before(line, " barriers").value_or(0));
      f.static_shared_bytes = number_before(line, " bytes smem").value_or(0);
    }
  }
  return report;
}

}  // namespace kintsugi::cuda
