// \file EmulatorRuntime.cpp
// The CUDA emulator's runtime (kemu_runtime.h), compiled once into the test executables that load
// emulated kernels: the fibers a CTA's threads run as, switched at every barrier and warp
// collective, the scheduler that releases them, and the instructions that act on a CTA's shared
// state, modelled as kintsugi_emu.h describes.
//
// Invariant established: see kintsugi_emu.h (a launch runs to completion with every thread
// reaching every barrier its CTA, warp or member mask reaches, or reports why not).
#include <setjmp.h>
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "emulated_tensor_map.h"
#include "ir/DType.h"
#include "kemu_runtime.h"

namespace kemu {

namespace {

// The exact value of f16 or bf16 bits.
float half_bits_to_float(uint16_t bits, bool bf16) {
  return float(bf16 ? kintsugi::bf16_bits_to_double(bits) : kintsugi::f16_bits_to_double(bits));
}

}  // namespace

struct Copy {  // a cp.async in flight
  uint32_t dst;
  const unsigned char* src;
  uint32_t bytes, src_bytes;
};

// An mbarrier: arrivals a phase, arrivals pending, bytes announced and not yet delivered, and the
// number of completed phases (its parity is the phase bit).
struct Mbarrier {
  uint32_t expected = 0, pending = 0;
  int64_t tx = 0;
  uint32_t phase = 0;
};

// A TMA tensor load in flight: its destination, map, box coordinates and mbarrier.
struct BulkCopy {
  uint32_t dst;
  const kemu_map::EmulatedTensorMap* map;
  int64_t at[5];
  uint32_t bar;
};

// A TMA store issued and not yet performed: its map, source and box coordinates.
struct BulkStore {
  const kemu_map::EmulatedTensorMap* map;
  uint32_t src;
  int64_t at[5];
};

// A named barrier: the threads it expects this round, those arrived, the fibers waiting.
struct NamedBarrier {
  unsigned expected = 0, arrived = 0;
  std::vector<struct Fiber*> waiting;
};

// A warpgroup's wgmma instructions in issue order, the group boundaries its commits set (the issue
// count at each), and how many groups have been computed.
struct Warpgroup {
  std::vector<WgmmaOp> ops;
  std::vector<size_t> commits;
  size_t retired = 0;
};

struct Fiber {
  ucontext_t context;  // its first entry
  jmp_buf resume;      // where it continues after a barrier
  bool started = false;
  unsigned tid = 0;
  Wait wait = Wait::Runnable;
  unsigned warp_mask = 0xffffffffu;       // the lanes of the warp collective it waits at
  std::vector<Copy> open;                 // issued, not yet committed
  std::vector<std::vector<Copy>> groups;  // committed, oldest first
  size_t wgmma_issued = 0, wgmma_commits = 0;
  std::vector<BulkStore> stores;                     // TMA stores since the last bulk commit
  std::vector<std::vector<BulkStore>> store_groups;  // committed, oldest first
};

struct State {
  std::vector<Fiber> fibers;
  std::vector<char*> stacks;
  jmp_buf scheduler;
  Fiber* current = nullptr;
  Dim3 block, threads;
  unsigned char* smem = nullptr;
  uint32_t smem_bytes = 0;
  bool eager_copies =
      false;  // cp.async lands when issued too (KINTSUGI_EMU_EAGER_COPIES non-empty)
  std::vector<uint32_t> exchange;          // 8 words a lane
  std::vector<unsigned char> async_view;   // shared memory as the asynchronous proxy sees it
  std::map<uint32_t, Mbarrier> mbarriers;  // by shared-window address
  std::vector<Warpgroup> warpgroups;
  std::vector<BulkCopy> bulk;  // TMA loads in flight, oldest first
  NamedBarrier named[16];
  uint64_t progress = 0;  // events that can let a spinning wait succeed
  std::string error;
  void (*body)(void*) = nullptr;
  void* body_context = nullptr;
};

static State& state() {
  static State s;
  return s;
}

constexpr size_t kStackBytes = 512 * 1024;

// Ends the launch: the scheduler stops at its next turn and reports `message`.
void fail(const char* message) {
  State& s = state();
  if (s.error.empty())
    s.error = "block " + std::to_string(s.block.x) + ", thread " +
              std::to_string(s.current ? s.current->tid : 0) + ": " + message;
  s.current->wait = Wait::Done;
  _longjmp(s.scheduler, 1);  // a failed fiber is never resumed
}
[[noreturn]] static void fail(const std::string& message) {
  fail(message.c_str());
}

// Switches happen at every barrier: _setjmp / _longjmp, which leave the signal mask alone (a
// swapcontext is a system call); a fiber's stack is entered once, by setcontext.
void block_at(Wait w) {
  State& s = state();
  if (w != Wait::Spin) ++s.progress;
  s.current->wait = w;
  if (!_setjmp(s.current->resume)) _longjmp(s.scheduler, 1);
}

unsigned lane() {
  return state().current->tid % 32;
}
uint32_t* slot(unsigned lane_index) {
  State& s = state();
  return &s.exchange[((s.current->tid / 32) * 32 + lane_index) * 8];
}

void check_mask(unsigned mask, const char* what) {
  if (!(mask >> lane() & 1u))
    fail(std::string(what) + " in lane " + std::to_string(lane()) + " with member mask " +
         std::to_string(mask) + ", which leaves the lane out");
}

static uint32_t shared_offset(uint32_t address, uint32_t bytes, const char* what) {
  State& s = state();
  if (uint64_t(address) + bytes > s.smem_bytes)
    fail(std::string(what) + " at shared address " + std::to_string(address) + " (+" +
         std::to_string(bytes) + " bytes) outside the CTA's " + std::to_string(s.smem_bytes) +
         " bytes of dynamic shared memory");
  return address;
}

static void land(const Copy& c) {
  State& s = state();
  uint32_t n = c.src_bytes < c.bytes ? c.src_bytes : c.bytes;
  if (n) std::memcpy(s.smem + c.dst, c.src, n);
  std::memset(s.smem + c.dst + n, 0, c.bytes - n);
}

static void mbarrier_complete_tx(uint32_t bar, uint32_t bytes);

// Visits the box of map `m` at coordinates `at` that lies at shared address `smem`, element by
// element: visit(shared address in the map's swizzle, global address, inside the tensor); returns
// the box's bytes.
template <class Visit>
static uint64_t walk_box(const kemu_map::EmulatedTensorMap& m, const int64_t* at, uint32_t smem,
                         Visit visit) {
  uint64_t count = 1;
  for (uint32_t d = 0; d < m.rank; ++d) count *= m.box[d];
  for (uint64_t e = 0; e < count; ++e) {
    uint64_t rest = e, global = m.address;
    bool inside = true;
    for (uint32_t d = 0; d < m.rank; ++d) {
      const int64_t x = at[d] + int64_t(rest % m.box[d]);
      rest /= m.box[d];
      inside = inside && x >= 0 && uint64_t(x) < m.dims[d];
      global += uint64_t(x) * m.strides[d];
    }
    uint32_t shared = smem + uint32_t(e * m.element_bytes);
    if (m.swizzle_bytes) shared ^= ((shared >> 7) & (m.swizzle_bytes / 16 - 1)) << 4;
    visit(shared, global, inside);
  }
  return count * m.element_bytes;
}

// Lands TMA copy `c`: the box, zeros outside the tensor, densely in shared memory (and in the
// asynchronous proxy's view) in its map's swizzle, then its bytes signalled to its mbarrier.
static void land_bulk(const BulkCopy& c) {
  State& s = state();
  const uint32_t n = c.map->element_bytes;
  const uint64_t bytes = walk_box(*c.map, c.at, c.dst, [&](uint32_t to, uint64_t from, bool in) {
    if (in)
      std::memcpy(s.smem + to, reinterpret_cast<const void*>(from), n);
    else
      std::memset(s.smem + to, 0, n);
    std::memcpy(s.async_view.data() + to, s.smem + to, n);
  });
  mbarrier_complete_tx(c.bar, uint32_t(bytes));
}

static void fiber_main() {
  State& s = state();
  s.body(s.body_context);
  ++s.progress;
  s.current->wait = Wait::Done;
  _longjmp(s.scheduler, 1);
}

// Fiber `f` of thread `tid`, not started, to run fiber_main on `stack`. Then run_fiber runs it
// until it waits or exits: it jumps back to the scheduler's mark set there. (Frames of their own,
// never inlined, so that the launch's loop variables are never live across a jump.)
__attribute__((noinline)) static void start_fiber(Fiber& f, unsigned tid, char* stack) {
  f = Fiber{};
  f.tid = tid;
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = stack;
  f.context.uc_stack.ss_size = kStackBytes;
  f.context.uc_link = nullptr;
  makecontext(&f.context, fiber_main, 0);
}
__attribute__((noinline)) static void run_fiber(State& s, Fiber& f) {
  s.current = &f;
  if (!_setjmp(s.scheduler)) {
    if (!f.started) {
      f.started = true;
      setcontext(&f.context);
    }
    _longjmp(f.resume, 1);
  }
}

// Runs `body` on every thread of every CTA of a 1-D grid; returns the first failure, or nullptr.
const char* launch(void (*body)(void*), void* context, unsigned grid, unsigned threads,
                   uint32_t smem_bytes) {
  State& s = state();
  s.error.clear();
  s.body = body;
  s.body_context = context;
  s.threads = Dim3{threads, 1, 1};
  std::vector<unsigned char> smem(smem_bytes + 16);
  s.smem = smem.data();
  s.smem_bytes = smem_bytes;
  const char* eager = std::getenv("KINTSUGI_EMU_EAGER_COPIES");
  s.eager_copies = eager != nullptr && *eager != '\0';
  s.exchange.assign(size_t(threads) * 8, 0);
  s.async_view.assign(smem_bytes, 0);
  while (s.stacks.size() < threads)
    s.stacks.push_back(static_cast<char*>(std::malloc(kStackBytes)));
  s.fibers.assign(threads, Fiber{});
  for (unsigned b = 0; b < grid && s.error.empty(); ++b) {
    s.block = Dim3{b, 0, 0};
    s.mbarriers.clear();
    s.bulk.clear();
    for (NamedBarrier& n : s.named) n = NamedBarrier{};
    s.warpgroups.assign((threads + 127) / 128, Warpgroup{});
    for (unsigned t = 0; t < threads; ++t) start_fiber(s.fibers[t], t, s.stacks[t]);
    for (;;) {
      const uint64_t progress = s.progress;
      for (Fiber& f : s.fibers)
        if ((f.wait == Wait::Runnable || f.wait == Wait::Spin) && s.error.empty()) {
          f.wait = Wait::Runnable;
          run_fiber(s, f);
        }
      if (!s.error.empty()) break;
      bool released = false, all_done = true, cta = true;
      // A warp collective completes when every lane of its member mask waits at it.
      for (unsigned t = 0; t < threads; ++t) {
        if (s.fibers[t].wait != Wait::Warp) continue;
        const unsigned mask = s.fibers[t].warp_mask, w = t / 32 * 32;
        bool met = true;
        for (unsigned l = 0; l < 32 && met; ++l)
          if (mask >> l & 1u)
            met = w + l < threads && s.fibers[w + l].wait == Wait::Warp &&
                  s.fibers[w + l].warp_mask == mask;
        if (!met) continue;
        for (unsigned l = 0; l < 32; ++l)
          if (mask >> l & 1u) s.fibers[w + l].wait = Wait::Runnable;
        released = true;
      }
      for (unsigned g = 0; g * 128 + 128 <= threads; ++g) {
        bool group = true;
        for (unsigned t = g * 128; t < g * 128 + 128; ++t)
          group = group && s.fibers[t].wait == Wait::Group;
        if (!group) continue;
        for (unsigned t = g * 128; t < g * 128 + 128; ++t) s.fibers[t].wait = Wait::Runnable;
        released = true;
      }
      bool spinning = false;
      for (const Fiber& f : s.fibers) {
        all_done = all_done && f.wait == Wait::Done;
        cta = cta && f.wait == Wait::Cta;
        spinning = spinning || f.wait == Wait::Spin;
      }
      if (all_done) {
        size_t stores = 0;
        for (const Fiber& f : s.fibers) {
          stores += f.stores.size();
          for (const std::vector<BulkStore>& g : f.store_groups) stores += g.size();
        }
        if (!s.bulk.empty() || stores)
          s.error = "block " + std::to_string(b) + ": " + std::to_string(s.bulk.size()) +
                    " TMA loads and " + std::to_string(stores) +
                    " TMA stores still in flight when the CTA exited";
        break;
      }
      if (!released && spinning && s.progress == progress && !s.bulk.empty()) {
        land_bulk(s.bulk.front());
        s.bulk.erase(s.bulk.begin());
        continue;
      }
      if (cta) {
        for (Fiber& f : s.fibers) f.wait = Wait::Runnable;
        released = true;
      }
      if (!released && !(spinning && s.progress != progress)) {
        // Where the threads stand, by state: how many, and the first of them.
        const char* names[] = {"",
                               " at __syncthreads",
                               " at a warp collective",
                               " at a warpgroup collective",
                               " at a named barrier",
                               " waiting on an mbarrier",
                               " exited"};
        std::string where;
        for (Wait w : {Wait::Cta, Wait::Warp, Wait::Group, Wait::Named, Wait::Spin, Wait::Done}) {
          unsigned count = 0, first = 0;
          for (const Fiber& f : s.fibers)
            if (f.wait == w && count++ == 0) first = f.tid;
          if (count)
            where += (where.empty() ? "" : ", ") + std::to_string(count) + " threads" +
                     names[int(w)] + " (the first: " + std::to_string(first) + ")";
        }
        s.error = "block " + std::to_string(b) + ": no barrier can complete: " + where;
      }
    }
  }
  s.current = nullptr;
  return s.error.empty() ? nullptr : s.error.c_str();
}

// f16 or bf16 element `half` (0: low) of a packed word.
static float unpack(uint32_t word, int half, bool bf16) {
  return half_bits_to_float(uint16_t(half ? word >> 16 : word & 0xffffu), bf16);
}

// mma.m16n8kK.row.col with `per_word` elements a 32-bit register (K = 8 per_word): lane l
// (g = l / 4, t = l % 4) holds A rows g (a0, a2) and g + 8 (a1, a3) at columns per_word t to
// per_word t + per_word - 1 (a0, a1) and the same plus K / 2 (a2, a3), B those rows (b0, b1) at
// column g, the lowest-indexed element in the lowest bits, and D rows g (d0, d1) and g + 8
// (d2, d3) at columns 2t, 2t + 1. `element(word, e)` reads element e of a word; products are
// summed in Sum and the result converted to T.
template <class Sum, class T, class Element>
static void mma_m16n8(T (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                      unsigned per_word, Element element) {
  uint32_t in[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
  T out[4];
  const unsigned K = 8 * per_word, half = K / 2;
  collective(in, 6, [&] {
    unsigned g = lane() / 4, t = lane() % 4;
    auto A = [&](unsigned r, unsigned k) {  // A[r][k]
      unsigned reg = (r >= 8 ? 1 : 0) + (k >= half ? 2 : 0);
      return element(slot((r % 8) * 4 + (k % half) / per_word)[reg], k % per_word);
    };
    auto B = [&](unsigned k, unsigned n) {  // B[k][n]
      return element(slot(n * 4 + (k % half) / per_word)[4 + (k >= half ? 1 : 0)], k % per_word);
    };
    for (int i = 0; i < 4; ++i) {
      unsigned r = g + (i >= 2 ? 8 : 0), n = 2 * t + (i % 2);
      Sum sum = Sum(acc[i]);
      for (unsigned k = 0; k < K; ++k) sum += Sum(A(r, k)) * Sum(B(k, n));
      out[i] = T(sum);
    }
  });
  for (int i = 0; i < 4; ++i) acc[i] = out[i];
}

// mma.m16n8k16.row.col, f16 or bf16 operands, summed in double and rounded to f32 once.
void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16) {
  mma_m16n8<double>(acc, a, b, 2,
                    [&](uint32_t word, unsigned e) { return unpack(word, int(e), bf16); });
}

// mma.m16n8k32.row.col.s32.s8.s8.s32: the sums are exact in 32 bits (wrapping, no saturation).
void mma_m16n8k32_s8(int32_t (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  mma_m16n8<uint32_t>(acc, a, b, 4, [](uint32_t word, unsigned e) {
    return int32_t(int8_t(uint8_t(word >> (8 * e))));
  });
}

// ldmatrix: lanes 8i .. 8i + 7 give the row addresses of matrix i; lane l receives row l / 4,
// columns 2 (l % 4) and + 1 of each matrix, or with .trans column l / 4 of rows 2 (l % 4), + 1.
void ldmatrix(uint32_t* d, int count, uint32_t row_address, bool trans) {
  uint32_t in[1] = {row_address};
  collective(in, 1, [&] {
    State& s = state();
    unsigned l = lane();
    for (int i = 0; i < count; ++i) {
      auto row = [&](unsigned r) { return shared_offset(slot(8 * i + r)[0], 16, "ldmatrix"); };
      uint16_t lo, hi;
      if (!trans) {
        std::memcpy(&lo, s.smem + row(l / 4) + 4 * (l % 4), 2);
        std::memcpy(&hi, s.smem + row(l / 4) + 4 * (l % 4) + 2, 2);
      } else {
        std::memcpy(&lo, s.smem + row(2 * (l % 4)) + 2 * (l / 4), 2);
        std::memcpy(&hi, s.smem + row(2 * (l % 4) + 1) + 2 * (l / 4), 2);
      }
      d[i] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
  });
}

void cp_async(uint32_t smem, const void* gmem, uint32_t bytes, uint32_t src_bytes) {
  shared_offset(smem, bytes, "cp.async");
  if (smem % bytes != 0 || reinterpret_cast<uintptr_t>(gmem) % bytes != 0)
    fail("cp.async of " + std::to_string(bytes) + " bytes from a misaligned address");
  Copy c{smem, static_cast<const unsigned char*>(gmem), bytes, src_bytes};
  if (state().eager_copies) land(c);
  state().current->open.push_back(c);
}

void cp_async_commit() {
  Fiber& f = *state().current;
  f.groups.push_back(std::move(f.open));
  f.open.clear();
}

void cp_async_retire(size_t keep) {
  Fiber& f = *state().current;
  while (f.groups.size() > keep) {
    for (const Copy& c : f.groups.front()) land(c);
    f.groups.erase(f.groups.begin());
  }
}

// --- mbarrier

static Mbarrier& mbarrier_at(uint32_t bar, const char* what) {
  shared_offset(bar, 8, what);
  if (bar % 8 != 0) fail(std::string(what) + " at a shared address not aligned to 8 bytes");
  auto it = state().mbarriers.find(bar);
  if (it == state().mbarriers.end())
    fail(std::string(what) + " at shared address " + std::to_string(bar) +
         ", where no mbarrier was initialised");
  return it->second;
}

void mbarrier_init(uint32_t bar, uint32_t arrivals) {
  shared_offset(bar, 8, "mbarrier.init");
  if (bar % 8 != 0) fail("mbarrier.init at a shared address not aligned to 8 bytes");
  if (arrivals == 0 || arrivals >= (1u << 20))
    fail("mbarrier.init with " + std::to_string(arrivals) + " arrivals (1 to 2^20 - 1)");
  state().mbarriers[bar] = Mbarrier{arrivals, arrivals, 0, 0};
  ++state().progress;
}

// The phase completes when its arrivals are in and its announced bytes delivered.
static void mbarrier_advance(Mbarrier& m) {
  if (m.pending != 0 || m.tx != 0) return;
  ++m.phase;
  m.pending = m.expected;
}

void mbarrier_expect_tx(uint32_t bar, uint32_t bytes) {
  mbarrier_at(bar, "mbarrier.expect_tx").tx += bytes;
}

void mbarrier_arrive(uint32_t bar) {
  Mbarrier& m = mbarrier_at(bar, "mbarrier.arrive");
  if (m.pending == 0)
    fail("mbarrier.arrive at shared address " + std::to_string(bar) +
         " after every arrival of its phase (the phase waits only for bytes)");
  --m.pending;
  mbarrier_advance(m);
  ++state().progress;
}

static void mbarrier_complete_tx(uint32_t bar, uint32_t bytes) {
  Mbarrier& m = mbarrier_at(bar, "mbarrier complete_tx");
  m.tx -= bytes;
  mbarrier_advance(m);
  ++state().progress;
}

// True once the phase of `parity` has completed: the current phase's parity is the other one. A
// false result lets the other threads run before the caller tries again.
bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity) {
  if (parity > 1) fail("mbarrier.try_wait.parity with a parity other than 0 or 1");
  const bool done = (mbarrier_at(bar, "mbarrier.try_wait.parity").phase & 1u) != parity;
  if (!done) block_at(Wait::Spin);
  return done;
}

// --- TMA

// The map of a cp.async.bulk.tensor at shared address `smem` with `coordinates` (into `at`),
// checked: encoded, of the coordinates' rank, the box inside the CTA's shared memory at an address
// aligned to the swizzle's repeat (128 bytes unswizzled).
static const kemu_map::EmulatedTensorMap* bulk_map(const void* map, uint32_t smem,
                                                   std::initializer_list<int32_t> coordinates,
                                                   int64_t* at) {
  const auto* m = static_cast<const kemu_map::EmulatedTensorMap*>(map);
  if (m->magic != kemu_map::kMagic) fail("cp.async.bulk.tensor with a tensor map not encoded");
  if (coordinates.size() != m->rank)
    fail("a " + std::to_string(coordinates.size()) + "-D cp.async.bulk.tensor on a " +
         std::to_string(m->rank) + "-D tensor map");
  uint64_t bytes = m->element_bytes;
  for (uint32_t d = 0; d < m->rank; ++d) bytes *= m->box[d];
  shared_offset(smem, uint32_t(bytes), "cp.async.bulk.tensor");
  const uint32_t repeat = m->swizzle_bytes ? 8 * m->swizzle_bytes : 128;
  if (smem % repeat != 0)
    fail("cp.async.bulk.tensor at shared address " + std::to_string(smem) + ", not a multiple of " +
         std::to_string(repeat) + " bytes");
  size_t d = 0;
  for (int32_t x : coordinates) at[d++] = x;
  return m;
}

void tma_load(uint32_t dst, const void* map, uint32_t bar,
              std::initializer_list<int32_t> coordinates) {
  BulkCopy c{dst, nullptr, {}, bar};
  c.map = bulk_map(map, dst, coordinates, c.at);
  mbarrier_at(bar, "cp.async.bulk.tensor's mbarrier");
  state().bulk.push_back(c);
}

void tma_store(const void* map, uint32_t src, std::initializer_list<int32_t> coordinates) {
  BulkStore b{nullptr, src, {}};
  b.map = bulk_map(map, src, coordinates, b.at);
  state().current->stores.push_back(b);
}

void bulk_commit() {
  Fiber& f = *state().current;
  f.store_groups.push_back(std::move(f.stores));
  f.stores.clear();
}

// Performs the calling thread's oldest store groups until `pending` are left: each box read from
// shared memory as the asynchronous proxy sees it now, written where it lies inside the tensor.
void bulk_wait(size_t pending) {
  State& s = state();
  Fiber& f = *s.current;
  while (f.store_groups.size() > pending) {
    for (const BulkStore& b : f.store_groups.front())
      walk_box(*b.map, b.at, b.src, [&](uint32_t from, uint64_t to, bool in) {
        if (in)
          std::memcpy(reinterpret_cast<void*>(to), s.async_view.data() + from,
                      b.map->element_bytes);
      });
    f.store_groups.erase(f.store_groups.begin());
  }
}

// --- named barriers, elect

// Thread arrival at named barrier `id` counting `count` threads this round; the arrival that
// completes the round releases the waiting threads; `wait`: the caller waits for it (bar.sync).
void named_barrier(unsigned id, unsigned count, bool wait) {
  State& s = state();
  if (id >= 16) fail("a named barrier id above 15");
  if (count == 0 || count % 32 != 0 || count > s.threads.x)
    fail("a named barrier over " + std::to_string(count) +
         " threads (a multiple of 32, at most the CTA's)");
  NamedBarrier& n = s.named[id];
  if (n.arrived == 0) n.expected = count;
  if (n.expected != count)
    fail("named barrier " + std::to_string(id) + " reached with " + std::to_string(count) +
         " threads and with " + std::to_string(n.expected));
  if (++n.arrived == n.expected) {
    for (Fiber* f : n.waiting) f->wait = Wait::Runnable;
    n = NamedBarrier{};
    ++s.progress;
    return;
  }
  if (!wait) return;
  n.waiting.push_back(s.current);
  block_at(Wait::Named);
}

// True in the lowest lane of the warp.
bool elect_one() {
  uint32_t in[1] = {0};
  collective(in, 1, [] {});
  return lane() == 0;
}

// --- wgmma

void fence_proxy_async() {
  State& s = state();
  std::memcpy(s.async_view.data(), s.smem, s.smem_bytes);
}

// The warpgroup of the calling thread, which must be one of four whole warps of the CTA.
static Warpgroup& warpgroup(const char* what) {
  State& s = state();
  const unsigned g = s.current->tid / 128;
  if (s.threads.x % 128 != 0)
    fail(std::string(what) + " in a CTA of " + std::to_string(s.threads.x) +
         " threads (warpgroups are 128)");
  return s.warpgroups[g];
}

// The shared-window address of element (row, k) of a 16-bit operand of `rows` x 16 (A: rows of M,
// B: rows of N) through descriptor `desc`, K-major or (`mn_major`) MN-major, with the swizzle
// applied to the address.
static uint32_t operand_address(uint64_t desc, bool mn_major, unsigned row, unsigned k) {
  const uint32_t start = uint32_t(desc & 0x3fffu) << 4;
  const uint32_t leading = uint32_t((desc >> 16) & 0x3fffu) << 4;
  const uint32_t stride = uint32_t((desc >> 32) & 0x3fffu) << 4;
  const unsigned base_offset = unsigned((desc >> 49) & 7u), mode = unsigned(desc >> 62);
  if (base_offset != 0) fail("a wgmma descriptor with a base offset is not emulated");
  // Swizzle width in bytes (0: none) and the mask of the 128-byte line index it XORs in.
  const uint32_t width = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
  uint32_t at;
  if (!mn_major) {
    at = width ? start + (row / 8) * stride + (row % 8) * width + k * 2
               : start + (row / 8) * stride + (k / 8) * leading + (row % 8) * 16 + (k % 8) * 2;
  } else {
    const unsigned span = width ? width / 2 : 8;  // elements of a row of the swizzle's width
    at = width ? start + (row % span) * 2 + (row / span) * leading + (k % 8) * width +
                     (k / 8) * stride
               : start + (row % 8) * 2 + (row / 8) * stride + (k % 8) * 16 + (k / 8) * leading;
  }
  if (width) at ^= ((at >> 7) & (width / 16 - 1)) << 4;
  return at;
}

// The shared-window address `at` of an operand's `bytes`, checked against the CTA's window.
static const uint8_t* operand_bytes(uint32_t at, unsigned bytes) {
  State& s = state();
  if (uint64_t(at) + bytes > s.smem_bytes)
    fail("a wgmma operand at shared address " + std::to_string(at) + " outside the CTA's " +
         std::to_string(s.smem_bytes) + " bytes of dynamic shared memory");
  return s.async_view.data() + at;
}

static float operand(uint64_t desc, bool mn_major, unsigned row, unsigned k, bool bf16) {
  uint16_t h;
  std::memcpy(&h, operand_bytes(operand_address(desc, mn_major, row, k), 2), 2);
  return half_bits_to_float(h, bf16);
}

// Element (row, k) of a K-major int8 operand: byte k of the row, within its 16-bit column k / 2
// (the swizzle moves 16-byte chunks, never the bytes inside one).
static int32_t operand_s8(uint64_t desc, unsigned row, unsigned k) {
  return int32_t(int8_t(*operand_bytes(operand_address(desc, false, row, k / 2) + k % 2, 1)));
}

// An s8 wgmma for the whole warpgroup: D (64 x N, s32) = A (64 x 32) * B (32 x N) (+ D), sums
// wrapping in 32 bits.
static void wgmma_compute_s8(const WgmmaOp& op) {
  int32_t A[64][32], B[32][256];
  for (unsigned r = 0; r < 64; ++r)
    for (unsigned k = 0; k < 32; ++k) A[r][k] = operand_s8(op.desc_a, r, k);
  for (unsigned k = 0; k < 32; ++k)
    for (unsigned n = 0; n < unsigned(op.n); ++n) B[k][n] = operand_s8(op.desc_b, n, k);
  for (unsigned t = 0; t < 128; ++t) {
    const unsigned w = t / 32, g = (t % 32) / 4, q = t % 4;
    int32_t* d = static_cast<int32_t*>(op.d[t]);
    for (unsigned i = 0; i < unsigned(op.n) / 2; ++i) {
      const unsigned r = 16 * w + g + 8 * ((i >> 1) & 1), c = 8 * (i >> 2) + 2 * q + (i & 1);
      uint32_t sum = op.accumulate ? uint32_t(d[i]) : 0u;
      for (unsigned k = 0; k < 32; ++k) sum += uint32_t(A[r][k] * B[k][c]);
      d[i] = int32_t(sum);
    }
  }
}

// Computes `op` for the whole warpgroup: each thread's accumulators through its pointer.
static void wgmma_compute(const WgmmaOp& op) {
  if (op.issued != 128) fail("a wgmma that not every thread of its warpgroup issued");
  if (op.s8) return wgmma_compute_s8(op);
  float A[64][16], B[16][256];
  for (unsigned r = 0; r < 64; ++r)
    for (unsigned k = 0; k < 16; ++k) {
      if (op.a_in_registers) {
        const unsigned t = 32 * (r / 16) + 4 * (r % 8) + (k % 8) / 2;
        const unsigned j = (r % 16 >= 8 ? 1 : 0) + 2 * (k / 8);
        A[r][k] = unpack(op.a[t][j], int(k % 2), op.bf16);
      } else {
        A[r][k] = operand(op.desc_a, op.trans_a, r, k, op.bf16);
      }
    }
  for (unsigned k = 0; k < 16; ++k)
    for (unsigned n = 0; n < unsigned(op.n); ++n)
      B[k][n] = operand(op.desc_b, op.trans_b, n, k, op.bf16);
  for (unsigned t = 0; t < 128; ++t) {
    const unsigned w = t / 32, g = (t % 32) / 4, q = t % 4;
    for (unsigned i = 0; i < unsigned(op.n) / 2; ++i) {
      const unsigned r = 16 * w + g + 8 * ((i >> 1) & 1), c = 8 * (i >> 2) + 2 * q + (i & 1);
      float* d = static_cast<float*>(op.d[t]);
      double sum = op.accumulate ? d[i] : 0.0;
      for (unsigned k = 0; k < 16; ++k) sum += double(A[r][k]) * double(B[k][c]);
      d[i] = float(sum);
    }
  }
}

// The calling thread's part of a wgmma: the thread's k-th issue joins the warpgroup's k-th op.
void wgmma_issue(const WgmmaOp& given, void* d, const uint32_t* a) {
  Warpgroup& wg = warpgroup("wgmma.mma_async");
  Fiber& f = *state().current;
  if (f.wgmma_issued == wg.ops.size()) wg.ops.push_back(given);
  WgmmaOp& op = wg.ops[f.wgmma_issued++];
  if (op.n != given.n || op.bf16 != given.bf16 || op.s8 != given.s8 ||
      op.trans_a != given.trans_a || op.trans_b != given.trans_b ||
      op.a_in_registers != given.a_in_registers || op.desc_a != given.desc_a ||
      op.desc_b != given.desc_b || op.accumulate != given.accumulate)
    fail("a wgmma whose shape, descriptors or accumulate flag differ across its warpgroup");
  const unsigned t = f.tid % 128;
  op.d[t] = d;
  if (a) std::memcpy(op.a[t], a, 16);
  ++op.issued;
}

void wgmma_commit() {
  Warpgroup& wg = warpgroup("wgmma.commit_group");
  Fiber& f = *state().current;
  if (f.wgmma_commits == wg.commits.size()) wg.commits.push_back(f.wgmma_issued);
  if (wg.commits[f.wgmma_commits++] != f.wgmma_issued)
    fail("a wgmma.commit_group after a different number of wgmma in each thread of a warpgroup");
}

// The warpgroup's threads meet; then every committed group but the newest `pending` is computed,
// in order (the first thread to leave computes them).
void wgmma_wait(size_t pending) {
  Warpgroup& wg = warpgroup("wgmma.wait_group");
  block_at(Wait::Group);
  const size_t commits = state().current->wgmma_commits;
  while (wg.retired + pending < commits) {
    const size_t first = wg.retired ? wg.commits[wg.retired - 1] : 0;
    for (size_t i = first; i < wg.commits[wg.retired]; ++i) wgmma_compute(wg.ops[i]);
    ++wg.retired;
  }
}

Dim3 thread_index() {
  return Dim3{state().current->tid, 0, 0};
}
Dim3 block_index() {
  return state().block;
}
Dim3 block_dim() {
  return state().threads;
}
unsigned char* dynamic_smem() {
  return state().smem;
}

void check_shuffle_source(unsigned mask, unsigned from) {
  if (!(mask >> from & 1u))
    fail("a shuffle in lane " + std::to_string(lane()) + " reads lane " + std::to_string(from) +
         ", outside its member mask " + std::to_string(mask));
}

void warp_meet(unsigned mask) {
  state().current->warp_mask = mask;
  block_at(Wait::Warp);
}

size_t shared_window_offset(const void* p) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  State& s = state();
  if (c < s.smem || c > s.smem + s.smem_bytes)
    fail("a shared-window address of memory outside the dynamic shared memory");
  return size_t(c - s.smem);
}

}  // namespace kemu
