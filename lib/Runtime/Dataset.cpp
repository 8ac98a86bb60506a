#include "nnsc/Runtime/Dataset.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace nnsc::rt {

namespace {

// A token file mapped into memory; little-endian host assumed (x86, arm64).
class MappedTokens : public TokenSource {
public:
  MappedTokens(void *map, size_t bytes, int width) : map_(map), bytes_(bytes), width_(width) {}
  ~MappedTokens() override {
    if (map_)
      ::munmap(map_, bytes_);
  }
  uint64_t size() const override { return bytes_ / width_; }
  int64_t at(uint64_t k) const override {
    const char *p = static_cast<const char *>(map_) + k * width_;
    if (width_ == 2) {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint64_t firstOutside(int64_t bound) const override {
    return width_ == 2 ? scan<uint16_t>(bound) : scan<int32_t>(bound);
  }

private:
  // A tight loop over the mapped file (a few GB/s), not a virtual call a token.
  template <typename T> uint64_t scan(int64_t bound) const {
    const char *p = static_cast<const char *>(map_);
    for (uint64_t k = 0, n = size(); k < n; ++k) {
      T v;
      std::memcpy(&v, p + k * sizeof(T), sizeof(T));
      if (int64_t(v) < 0 || int64_t(v) >= bound)
        return k;
    }
    return size();
  }

  void *map_;
  size_t bytes_;
  int width_;
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class SyntheticTokens : public TokenSource {
public:
  SyntheticTokens(uint64_t vocab, uint64_t seed, uint64_t n) : vocab_(vocab), seed_(seed), n_(n) {}
  uint64_t size() const override { return n_; }
  int64_t at(uint64_t k) const override {
    return static_cast<int64_t>(splitmix64(seed_ * 0x100000001b3ull + k) % vocab_);
  }

private:
  uint64_t vocab_, seed_, n_;
};

} // namespace

uint64_t globalSampleIndex(const SampleLayout &l, int64_t step, int64_t micro, int64_t i) {
  uint64_t slot = uint64_t(step) * uint64_t(l.gradAccumulation) + uint64_t(micro);
  return (slot * uint64_t(l.dpSize) + uint64_t(l.dpRank)) * uint64_t(l.microBatchSize) +
         uint64_t(i);
}

uint64_t sampleOffset(uint64_t g, uint64_t seed, uint64_t numTokens, uint64_t blockSize) {
  return splitmix64(g ^ splitmix64(seed)) % (numTokens - blockSize - 1);
}

Expected<std::shared_ptr<TokenSource>> openTokenFile(const std::string &path,
                                                     const std::string &dtype) {
  int width = dtype == "int32" ? 4 : 2;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return errorf("{}: error: cannot open token file: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return errorf("{}: error: is a directory, expected a token file", path);
  }
  if (::fstat(fd, &st) != 0 || st.st_size == 0) {
    ::close(fd);
    return errorf("{}: error: token file is empty or unreadable", path);
  }
  if (st.st_size % width != 0) {
    ::close(fd);
    return errorf("{}: error: size {} is not a multiple of {} bytes ({} tokens)", path, st.st_size,
                  width, dtype);
  }
  void *map = ::mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return errorf("{}: error: cannot map token file: {}", path, std::strerror(errno));
  return std::shared_ptr<TokenSource>(
      std::make_shared<MappedTokens>(map, size_t(st.st_size), width));
}

std::shared_ptr<TokenSource> syntheticTokens(uint64_t vocabSize, uint64_t seed,
                                             uint64_t numTokens) {
  return std::make_shared<SyntheticTokens>(vocabSize, seed, numTokens);
}

Expected<TokenDataset> TokenDataset::create(std::shared_ptr<TokenSource> source, int64_t blockSize,
                                            uint64_t seed, const std::string &name) {
  if (blockSize <= 0 || source->size() < uint64_t(blockSize) + 2)
    return errorf("{}: error: {} tokens are too few for block_size {}; need at least {}", name,
                  source->size(), blockSize, blockSize + 2);
  TokenDataset d;
  d.source_ = std::move(source);
  d.blockSize_ = blockSize;
  d.seed_ = seed;
  return d;
}

TokenBatch TokenDataset::trainBatch(const SampleLayout &layout, int64_t step, int64_t micro) const {
  TokenBatch b;
  b.batch = layout.microBatchSize;
  b.block = blockSize_;
  b.x.resize(b.batch * b.block);
  b.y.resize(b.batch * b.block);
  for (int64_t i = 0; i < b.batch; ++i) {
    uint64_t o = sampleOffset(globalSampleIndex(layout, step, micro, i), seed_, source_->size(),
                              uint64_t(blockSize_));
    for (int64_t t = 0; t < b.block; ++t) {
      b.x[i * b.block + t] = source_->at(o + t);
      b.y[i * b.block + t] = source_->at(o + t + 1);
    }
  }
  return b;
}

TokenBatch TokenDataset::valBatch(const SampleLayout &layout, int64_t v) const {
  SampleLayout single = layout;
  single.gradAccumulation = 1;
  return trainBatch(single, v, 0);
}

uint64_t sampleRow(uint64_t g, uint64_t seed, uint64_t numSamples) {
  // Epoch e = g / N visits every row once, in the order of a keyed bijection
  // of [0, 2^(2h)) (four Feistel rounds over h-bit halves, 2^(2h) the least
  // power of 4 >= max(N, 4)), walked until it lands below N: at most 4
  // applications on average, since 2^(2h) <= 4N.
  const uint64_t epoch = g / numSamples, position = g % numSamples;
  int half = 1;
  while (half < 32 && (uint64_t(1) << (2 * half)) < numSamples)
    ++half;
  const uint64_t mask = (half == 32) ? 0xffffffffull : (uint64_t(1) << half) - 1;
  const uint64_t key = splitmix64(splitmix64(seed) ^ epoch);
  uint64_t roundKeys[4];
  for (uint64_t r = 0; r < 4; ++r)
    roundKeys[r] = splitmix64(key + r);
  uint64_t x = position;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t k : roundKeys) {
      uint64_t next = left ^ (splitmix64(right ^ k) & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= numSamples);
  return x;
}

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The expected shape of a stored tensor, with N for the sample dim.
std::string expectedShapeText(const TensorInputSpec &in) {
  std::string dims = "N";
  for (int64_t d : in.sampleShape)
    dims += fmt::format(", {}", d);
  return "[" + dims + "]";
}

std::string entryNames(const SafetensorsFile &file) {
  std::string out;
  for (const auto &e : file.entries())
    out += (out.empty() ? "" : ", ") + e.name;
  return out.empty() ? "none" : out;
}

// Checks that `e` holds samples of input `in`: its dtype and [N, sampleShape...].
Status checkEntry(const SafetensorsEntry &e, const TensorInputSpec &in, const std::string &path) {
  std::vector<int64_t> perSample(e.shape.begin() + (e.shape.empty() ? 0 : 1), e.shape.end());
  if (e.dtype == in.dtype && !e.shape.empty() && perSample == in.sampleShape)
    return Status::ok();
  return errorf("{}: error: tensor '{}' is {} {}; the program's input '{}' needs {} {} "
                "(N samples of shape {})",
                path, e.name, e.dtype, shapeText(e.shape), in.name, in.dtype, expectedShapeText(in),
                shapeText(in.sampleShape));
}

int64_t rowBytes(const SafetensorsEntry &e) {
  int64_t n = safetensorsElementSize(e.dtype);
  for (size_t d = 1; d < e.shape.size(); ++d)
    n *= e.shape[d];
  return n;
}

} // namespace

Expected<TensorDataset> TensorDataset::open(const std::string &path,
                                            std::vector<TensorInputSpec> inputs, uint64_t seed) {
  auto file = SafetensorsFile::open(path);
  if (!file)
    return file.status();
  TensorDataset d;
  d.file_ = file.take();
  d.inputs_ = std::move(inputs);
  d.seed_ = seed;
  for (const TensorInputSpec &in : d.inputs_) {
    const SafetensorsEntry *e = d.file_->find(in.name);
    if (!e)
      return errorf("{}: error: no tensor '{}' for the program's input '{}' ({} {}); the file "
                    "holds: {}",
                    path, in.name, in.name, in.dtype, expectedShapeText(in), entryNames(*d.file_));
    NNSC_RETURN_IF_ERROR(checkEntry(*e, in, path));
    if (d.entries_.empty() && e->shape[0] <= 0)
      return errorf("{}: error: tensor '{}' holds no samples (shape {})", path, e->name,
                    shapeText(e->shape));
    if (!d.entries_.empty() && e->shape[0] != d.entries_[0]->shape[0])
      return errorf("{}: error: tensor '{}' has {} samples (first dim) but tensor '{}' has {}; "
                    "every input needs the same number",
                    path, e->name, e->shape[0], d.entries_[0]->name, d.entries_[0]->shape[0]);
    d.entries_.push_back(e);
  }
  if (d.entries_.empty())
    return errorf("{}: error: the program has no inputs to feed", path);
  d.numSamples_ = uint64_t(d.entries_[0]->shape[0]);
  return d;
}

std::vector<TensorField> TensorDataset::trainBatch(const SampleLayout &layout, int64_t step,
                                                   int64_t micro) const {
  std::vector<uint64_t> rows(layout.microBatchSize);
  for (int64_t i = 0; i < layout.microBatchSize; ++i)
    rows[i] = sampleRow(globalSampleIndex(layout, step, micro, i), seed_, numSamples_);
  std::vector<TensorField> fields;
  for (const SafetensorsEntry *e : entries_) {
    TensorField f;
    f.dtype = e->dtype;
    f.shape = e->shape;
    f.shape[0] = layout.microBatchSize;
    size_t width = size_t(rowBytes(*e));
    f.bytes.resize(rows.size() * width);
    for (size_t i = 0; i < rows.size(); ++i)
      std::memcpy(f.bytes.data() + i * width, e->bytes.data() + rows[i] * width, width);
    fields.push_back(std::move(f));
  }
  return fields;
}

std::vector<TensorField> TensorDataset::valBatch(const SampleLayout &layout, int64_t v) const {
  SampleLayout single = layout;
  single.gradAccumulation = 1;
  return trainBatch(single, v, 0);
}

} // namespace nnsc::rt
