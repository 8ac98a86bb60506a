#pragma once
/// The random streams of split random ops (docs/randomness.md, rule 3).
///
/// A rank program brackets each piece of a split random op with
/// nnsc.rng_fork(node, piece) and nnsc.rng_join(): the fork keeps the
/// default generator's state aside and seeds the generator from
/// (seed, data-parallel copy, forward index, node, piece); the join puts the
/// kept state back. So the pieces of one op draw independent values, the
/// replicas of a piece draw the same ones, and the shared stream (what every
/// unsplit random op draws from) advances alike on every rank of a copy.
/// Because a piece's seed is a function of the forward's index, a resumed
/// run and a re-run (recomputed) forward draw the same values again.

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace nnsc::rt {

/// Where the streams come from: the run's seed, this rank's data-parallel
/// copy, and the device whose default generator the program's random ops
/// use ("cpu", "cuda", "cuda:1"). The trainer calls it once at setup.
void setRngStreams(uint64_t seed, int64_t dpRank, const std::string &device);

/// The index of the forward about to run: step * accumulation + micro-batch
/// in training, -1 - batch in validation. A fork left open by a failed
/// forward is closed (the shared state restored).
void setRngForward(int64_t index);

/// nnsc.rng_fork: keeps the default generator's state aside and seeds it for
/// piece `piece` of node `node`. Throws (c10::Error) when a fork is open.
void rngFork(int64_t node, int64_t piece);

/// nnsc.rng_join: restores the state kept by the open fork. Throws when no
/// fork is open.
void rngJoin();

/// What a recomputed segment must see again to draw the same values: the
/// default generator's state on the streams' device and the forward index.
struct RngSnapshot {
  at::Tensor state;
  int64_t forward = 0;
};

/// The current RngSnapshot (no fork may be open: throws otherwise).
RngSnapshot rngSnapshot();

/// Puts the generator state and forward index of `snapshot` back (no fork
/// may be open).
void rngRestore(const RngSnapshot &snapshot);

/// The seed of piece `piece` of node `node` in forward `forward` of copy
/// `dpRank` under run seed `seed` (a SplitMix64 chain over the five).
uint64_t pieceSeed(uint64_t seed, int64_t dpRank, int64_t forward, int64_t node, int64_t piece);

} // namespace nnsc::rt
