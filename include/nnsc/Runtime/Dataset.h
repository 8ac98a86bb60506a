#pragma once
/// Training datasets whose samples are a pure function of (step, micro-batch,
/// data-parallel rank, sample), so that a Python reference can reproduce every
/// batch exactly and a resumed run sees the same data as an uninterrupted one.
/// No LibTorch here.
///
///   g = ((step * accum + micro) * dp_size + dp_rank) * micro_batch_size + i
///
/// Token data (language models), N tokens, blocks of T: independent uniform
/// windows, as nanoGPT's torch.randint (the stride over the stream this was
/// visited the text in nearly the same order every pass):
///   offset(g) = mix(g xor mix(seed)) mod (N - T - 1)                (uint64)
///   mix(x) = SplitMix64's step: x += 0x9e3779b97f4a7c15;
///            x = (x ^ x >> 30) * 0xbf58476d1ce4e5b9;
///            x = (x ^ x >> 27) * 0x94d049bb133111eb; x ^ x >> 31
///   x = tokens[offset : offset + T],  y = tokens[offset + 1 : offset + T + 1]
///
/// Tensor data (any model), one stored tensor per program input, N rows each:
///   row(g) = P_{seed, g div N}(g mod N)                           (uint64)
///   input k = tensor_k[row(g)]
/// with P_{seed, e} a keyed permutation of [0, N) per epoch e (sampleRow):
/// each epoch visits every row once, in a fresh order.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nnsc/Support/Safetensors.h"
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
  /// The first position whose token is not in [0, bound), or size().
  virtual uint64_t firstOutside(int64_t bound) const {
    for (uint64_t k = 0; k < size(); ++k)
      if (at(k) < 0 || at(k) >= bound)
        return k;
    return size();
  }
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

/// The row of global sample `g` in a tensor dataset of `numSamples` rows:
/// position g mod N of epoch g div N's permutation (a four-round Feistel
/// bijection keyed by seed and epoch, cycle-walked into [0, N); docs/
/// trainer-config.md spells it out). Requires numSamples > 0.
uint64_t sampleRow(uint64_t g, uint64_t seed, uint64_t numSamples);

/// What one program input expects from a tensor dataset.
struct TensorInputSpec {
  std::string name;                 ///< the manifest input's name, the tensor's key
  std::string dtype;                ///< safetensors code ("F32", "I64", ...)
  std::vector<int64_t> sampleShape; ///< the input's shape without the batch dim
};

/// One input's micro-batch: row-major bytes of shape [B, sampleShape...].
struct TensorField {
  std::string dtype; ///< safetensors code
  std::vector<int64_t> shape;
  std::string bytes;
};

/// Samples stored in a safetensors file: for every program input a tensor
/// keyed by the input's name, of shape [N, sampleShape...] and the input's
/// dtype, all with the same N. Other tensors in the file are ignored.
class TensorDataset {
public:
  /// Maps `path` and checks it against `inputs`; errors name the file, the
  /// tensor and what was expected.
  static Expected<TensorDataset> open(const std::string &path, std::vector<TensorInputSpec> inputs,
                                      uint64_t seed);

  /// Micro-batch `micro` of training step `step` for the rank in `layout`:
  /// one field per input, in the order `open` was given them.
  std::vector<TensorField> trainBatch(const SampleLayout &layout, int64_t step,
                                      int64_t micro) const;

  /// Validation batch `v` (0-based): step = v, gradAccumulation = 1, micro = 0.
  std::vector<TensorField> valBatch(const SampleLayout &layout, int64_t v) const;

  uint64_t numSamples() const { return numSamples_; }

private:
  TensorDataset() = default;
  std::shared_ptr<SafetensorsFile> file_;
  std::vector<TensorInputSpec> inputs_;
  std::vector<const SafetensorsEntry *> entries_; ///< borrowed from file_, one per input
  uint64_t numSamples_ = 0;
  uint64_t seed_ = 0;
};

} // namespace nnsc::rt
