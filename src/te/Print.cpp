// \file Print.cpp
// Source-like text of a tensor-expression program (`kintsugi lower --print te`). After check(),
// inferred extents are written explicitly (`j: T`), so the text also documents the inference.
#include <sstream>

#include "ir/Printer.h"
#include "te/Program.h"

namespace kintsugi::te {

namespace {
void print_axes(std::ostringstream& out, const std::vector<ir::Axis>& axes) {
  for (size_t k = 0; k < axes.size(); ++k) {
    out << (k ? ", " : "") << axes[k].name;
    if (axes[k].extent) out << ": " << ir::to_string(axes[k].extent);
  }
}

}  // namespace

std::string to_string(const Program& p) {
  std::ostringstream out;
  out << "# program " << p.name << "\n";
  if (!p.size_hints.empty()) {
    out << "sizes ";
    bool first = true;
    for (const auto& d : p.dims) {
      auto it = p.size_hints.find(d);
      if (it == p.size_hints.end()) continue;
      out << (first ? "" : ", ") << d << " = " << it->second;
      first = false;
    }
    out << "\n";
  }
  for (const auto& q : p.params)
    out << "param " << q.name << ": " << dtype_name(q.dtype) << " = " << ir::format_double(q.value)
        << "\n";
  for (const auto& in : p.inputs) {
    out << "input " << in.name << ": " << dtype_name(in.dtype) << "[";
    for (size_t k = 0; k < in.shape.size(); ++k)
      out << (k ? ", " : "") << ir::to_string(in.shape[k]);
    out << "]\n";
  }
  for (const auto& d : p.defs) {
    if (d.is_output) out << "output ";
    out << d.name;
    if (!d.indices.empty()) {
      out << "[";
      print_axes(out, d.indices);
      out << "]";
    }
    if (d.dtype != DType::Unknown) out << ": " << dtype_name(d.dtype);
    out << " = " << ir::to_string(d.body) << "\n";
  }
  return out.str();
}

}  // namespace kintsugi::te
