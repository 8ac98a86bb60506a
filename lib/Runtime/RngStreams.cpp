// Streams of their own for the pieces of split random ops (RngStreams.h).
#include "nnsc/Runtime/RngStreams.h"

#include <mutex>
#include <optional>

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

namespace nnsc::rt {

namespace {

struct Streams {
  std::mutex mutex;
  uint64_t seed = 0;
  int64_t dpRank = 0;
  int64_t forward = 0;
  c10::Device device{c10::kCPU};
  // The open fork: the shared state kept aside, and what opened it.
  std::optional<at::Tensor> kept;
  int64_t node = -1;
  int64_t piece = -1;
};

Streams &streams() {
  static Streams s;
  return s;
}

at::Generator generatorOf(const c10::Device &device) {
  return at::globalContext().defaultGenerator(device);
}

at::Tensor stateOf(at::Generator &gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void restore(Streams &s) {
  at::Generator gen = generatorOf(s.device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(*s.kept);
  s.kept.reset();
}

uint64_t splitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace

uint64_t pieceSeed(uint64_t seed, int64_t dpRank, int64_t forward, int64_t node, int64_t piece) {
  uint64_t h = splitMix(seed);
  for (int64_t v : {dpRank, forward, node, piece})
    h = splitMix(h ^ uint64_t(v));
  return h;
}

void setRngStreams(uint64_t seed, int64_t dpRank, const std::string &device) {
  Streams &s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.kept)
    restore(s);
  s.seed = seed;
  s.dpRank = dpRank;
  s.device = c10::Device(device);
}

void setRngForward(int64_t index) {
  Streams &s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.kept)
    restore(s);
  s.forward = index;
}

void rngFork(int64_t node, int64_t piece) {
  Streams &s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  TORCH_CHECK(!s.kept, fmt::format("nnsc.rng_fork(node={}, piece={}): the fork of node {} piece "
                                   "{} is still open (a program forks once per random op and "
                                   "joins after it)",
                                   node, piece, s.node, s.piece));
  at::Generator gen = generatorOf(s.device);
  s.kept = stateOf(gen);
  s.node = node;
  s.piece = piece;
  std::lock_guard<std::mutex> genLock(gen.mutex());
  gen.set_current_seed(pieceSeed(s.seed, s.dpRank, s.forward, node, piece));
}

void rngJoin() {
  Streams &s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  TORCH_CHECK(s.kept, "nnsc.rng_join(): no nnsc.rng_fork is open");
  restore(s);
}

} // namespace nnsc::rt

namespace nnsc::rt {

RngSnapshot rngSnapshot() {
  Streams &s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  TORCH_CHECK(!s.kept, fmt::format("nnsc.recompute: a segment starts while the fork of node {} "
                                   "piece {} is open",
                                   s.node, s.piece));
  at::Generator gen = generatorOf(s.device);
  return {stateOf(gen), s.forward};
}

void rngRestore(const RngSnapshot &snapshot) {
  Streams &s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  TORCH_CHECK(!s.kept, "nnsc.recompute: cannot restore the random state while a fork is open");
  at::Generator gen = generatorOf(s.device);
  std::lock_guard<std::mutex> genLock(gen.mutex());
  gen.set_state(snapshot.state);
  s.forward = snapshot.forward;
}

} // namespace nnsc::rt
