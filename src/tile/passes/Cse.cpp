// \file Cse.cpp
// Common subexpression elimination over the tile IR: an operation identical to an earlier one
// that is still visible (same kind, type, operands and attributes) is replaced by it. Values
// defined before a loop are visible inside it; values defined inside are not visible after.
// A register read or a load is reused only while nothing wrote the register or stored to the
// buffer: a write or store forgets the reads of that name, and entering a loop forgets the reads
// of everything the loop writes (a later iteration sees the writes of an earlier one).
//
// Invariant established: no two visible operations compute the same value; every use refers to
// a value that dominates it.
#include <map>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

class Cse {
 public:
  void body(TileBody& b, std::map<std::string, int> visible) {
    TileBody out;
    for (TileStmt& s : b) {
      if (s.kind == StmtKind::For) {
        std::set<std::string> written = written_in(s.body);
        std::map<std::string, int> inner = visible;
        for (auto it = inner.begin(); it != inner.end();)
          it = source_of_.count(it->second) && written.count(source_of_.at(it->second))
                   ? inner.erase(it)
                   : std::next(it);
        body(s.body, inner);
        // Reads of what the loop writes are stale after it.
        for (auto it = visible.begin(); it != visible.end();)
          it = source_of_.count(it->second) && written.count(source_of_.at(it->second))
                   ? visible.erase(it)
                   : std::next(it);
        out.push_back(std::move(s));
        continue;
      }
      TileOp& o = s.op;
      for (int& a : o.args)
        if (auto r = replaced_.find(a); r != replaced_.end()) a = r->second;
      if (o.kind == OpKind::Store || o.kind == OpKind::Write) {
        for (auto it = visible.begin(); it != visible.end();)
          it = source_of_.count(it->second) && source_of_.at(it->second) == o.buffer
                   ? visible.erase(it)
                   : std::next(it);
        out.push_back(std::move(s));
        continue;
      }
      TileOp key_op = o;
      key_op.result = -1;
      std::string key = to_string(key_op);
      if (auto it = visible.find(key); it != visible.end()) {
        replaced_[o.result] = it->second;
        continue;
      }
      visible[key] = o.result;
      if (o.kind == OpKind::Read || reads_buffer(o)) source_of_[o.result] = o.buffer;
      out.push_back(std::move(s));
    }
    b = std::move(out);
  }

 private:
  std::map<int, int> replaced_;           // value -> the earlier identical value
  std::map<int, std::string> source_of_;  // read or loaded value -> register or buffer
};

}  // namespace

void cse(TileProgram& p) {
  for (Kernel& k : p.kernels) Cse().body(k.body, {});
}

}  // namespace kintsugi::tile
