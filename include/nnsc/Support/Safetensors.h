#pragma once
/// The safetensors format: an 8-byte little-endian header length, a JSON
/// header {"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}
/// and the raw row-major bytes. Readable by the Hugging Face library.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc {

/// One tensor's entry: dtype as a safetensors code ("F32", "I64", ...).
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string_view bytes; ///< borrowed; must outlive the write call
};

/// Writes `entries` (sorted by name in the header) atomically to `path`.
Status writeSafetensors(const std::string &path, const std::vector<SafetensorsEntry> &entries,
                        const std::map<std::string, std::string> &metadata = {});

/// A safetensors file mapped into memory; entries borrow from it.
class SafetensorsFile {
public:
  /// Opens and validates `path`; errors name the file and the broken part.
  static Expected<std::shared_ptr<SafetensorsFile>> open(const std::string &path);
  /// Validates `bytes` (a whole file's contents, kept by the result); `name`
  /// stands for the file in errors.
  static Expected<std::shared_ptr<SafetensorsFile>> fromBytes(std::string bytes,
                                                              const std::string &name);
  ~SafetensorsFile();

  const std::vector<SafetensorsEntry> &entries() const { return entries_; }
  const SafetensorsEntry *find(const std::string &name) const;
  const std::map<std::string, std::string> &metadata() const { return metadata_; }

private:
  SafetensorsFile() = default;
  /// Reads the header of `all` (the whole file) into entries_ and metadata_.
  Status parse(std::string_view all, const std::string &path);
  void *map_ = nullptr;
  size_t size_ = 0;
  std::string owned_; ///< the contents when not mapped (fromBytes)
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// Bytes per element of a safetensors dtype code, or 0 if unknown.
int64_t safetensorsElementSize(std::string_view dtype);

} // namespace nnsc
