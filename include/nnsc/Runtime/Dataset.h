#pragma once
/// Token datasets for language-model training, with sample offsets that are a
/// pure function of (step, micro-batch, data-parallel rank, sample) so that a
/// Python reference can reproduce every batch exactly and a resumed run sees
/// the same data as an uninterrupted one. No LibTorch here.
///
///   g = ((step * accum + micro) * dp_size + dp_rank) * micro_batch_size + i
///   offset(g) = (g * 2654435761 + seed * 97) mod (N - T - 1)     (uint64)
///   x = tokens[offset : offset + T],  y = tokens[offset + 1 : offset + T + 1]

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc::rt {

/// Where a rank's micro-batches sit in the global sample order.
struct SampleLayout {
  int64_t microBatchSize = 1; ///< B, samples per rank and micro-batch
  int64_t gradAccumulation = 1;
  int64_t dpSize = 1;
  int64_t dpRank = 0;
};

/// Global index of sample `i` of micro-batch `micro` of `step` (0-based).
uint64_t globalSampleIndex(const SampleLayout &layout, int64_t step, int64_t micro, int64_t i);

/// The deterministic start offset of global sample `g` in a stream of
/// `numTokens` tokens with blocks of `blockSize`. Requires numTokens > blockSize + 1.
uint64_t sampleOffset(uint64_t g, uint64_t seed, uint64_t numTokens, uint64_t blockSize);

/// A read-only stream of token ids.
class TokenSource {
public:
  virtual ~TokenSource() = default;
  virtual uint64_t size() const = 0;
  /// Token at position `k` (< size()).
  virtual int64_t at(uint64_t k) const = 0;
};

/// Maps a raw little-endian token file (dtype "uint16" as nanoGPT's
/// train.bin, or "int32"); errors name the file.
Expected<std::shared_ptr<TokenSource>> openTokenFile(const std::string &path,
                                                     const std::string &dtype);

/// A synthetic stream of `numTokens` ids in [0, vocabSize), a hash of
/// (seed, position), for benchmarks that need no data file.
std::shared_ptr<TokenSource> syntheticTokens(uint64_t vocabSize, uint64_t seed,
                                             uint64_t numTokens = uint64_t(1) << 24);

/// One micro-batch: x and y as row-major [B, T] int64 ids.
struct TokenBatch {
  int64_t batch = 0, block = 0;
  std::vector<int64_t> x, y;
};

/// Batches of blockSize tokens from a TokenSource.
class TokenDataset {
public:
  /// Fails when the source is shorter than blockSize + 2 tokens.
  static Expected<TokenDataset> create(std::shared_ptr<TokenSource> source, int64_t blockSize,
                                       uint64_t seed, const std::string &name);

  /// Micro-batch `micro` of training step `step` for the rank in `layout`.
  TokenBatch trainBatch(const SampleLayout &layout, int64_t step, int64_t micro) const;

  /// Validation batch `v` (0-based): the same formula with step = v,
  /// gradAccumulation = 1, micro = 0.
  TokenBatch valBatch(const SampleLayout &layout, int64_t v) const;

  uint64_t numTokens() const { return source_->size(); }
  int64_t blockSize() const { return blockSize_; }

private:
  TokenDataset() = default;
  std::shared_ptr<TokenSource> source_;
  int64_t blockSize_ = 0;
  uint64_t seed_ = 0;
};

} // namespace nnsc::rt
