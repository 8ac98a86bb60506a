#include "nnsc/Support/Safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nnsc/Support/File.h"

namespace nnsc {

int64_t safetensorsElementSize(std::string_view dtype) {
  static const std::map<std::string_view, int64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},
      {"I16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"C64", 8}, {"C128", 16}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

static int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Status writeSafetensors(const std::string &path, const std::vector<SafetensorsEntry> &entries,
                        const std::map<std::string, std::string> &metadata) {
  std::vector<const SafetensorsEntry *> sorted;
  for (const auto &e : entries)
    sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](auto *a, auto *b) { return a->name < b->name; });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto *e : sorted) {
    int64_t expect = numel(e->shape) * safetensorsElementSize(e->dtype);
    if (expect != static_cast<int64_t>(e->bytes.size()))
      return Status::internal(fmt::format("safetensors entry '{}' has {} bytes, expected {}",
                                          e->name, e->bytes.size(), expect));
    header[e->name] = {{"dtype", e->dtype},
                       {"shape", e->shape},
                       {"data_offsets", {offset, offset + e->bytes.size()}}};
    offset += e->bytes.size();
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' '); // keep the data 8-byte aligned
  std::string prefix;
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    prefix.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  prefix += json;
  return writeFileAtomicStreamed(path, [&](const auto &append) {
    NNSC_RETURN_IF_ERROR(append(prefix));
    for (const auto *e : sorted)
      NNSC_RETURN_IF_ERROR(append(e->bytes));
    return Status::ok();
  });
}

SafetensorsFile::~SafetensorsFile() {
  if (map_)
    ::munmap(map_, size_);
}

const SafetensorsEntry *SafetensorsFile::find(const std::string &name) const {
  for (const auto &e : entries_)
    if (e.name == name)
      return &e;
  return nullptr;
}

// The format lays entries out one after another: bytes shared by two entries
// are a damaged header (either tensor would read the other's data). Sorts
// the entries by name afterwards.
static Status checkDisjoint(const std::string &path, std::string_view data,
                            std::vector<SafetensorsEntry> &entries) {
  auto begin = [&](const SafetensorsEntry &e) { return e.bytes.data() - data.data(); };
  std::sort(entries.begin(), entries.end(), [&](const auto &a, const auto &b) {
    return begin(a) != begin(b) ? begin(a) < begin(b) : a.bytes.size() < b.bytes.size();
  });
  for (size_t i = 1; i < entries.size(); ++i) {
    const SafetensorsEntry &a = entries[i - 1], &b = entries[i];
    if (!b.bytes.empty() && begin(b) < begin(a) + int64_t(a.bytes.size()))
      return errorf("{}: error: entry '{}' data_offsets [{}, {}] overlap entry '{}' [{}, {}]", path,
                    b.name, begin(b), begin(b) + int64_t(b.bytes.size()), a.name, begin(a),
                    begin(a) + int64_t(a.bytes.size()));
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto &a, const auto &b) { return a.name < b.name; });
  return Status::ok();
}

static Status parseHeader(const std::string &path, std::string_view json, std::string_view data,
                          std::vector<SafetensorsEntry> &entries,
                          std::map<std::string, std::string> &metadata) {
  nlohmann::json header = nlohmann::json::parse(json, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return errorf("{}: error: not a safetensors file (header is not a JSON object)", path);
  for (auto &[name, v] : header.items()) {
    if (name == "__metadata__") {
      for (auto &[k, mv] : v.items())
        metadata[k] = mv.is_string() ? mv.get<std::string>() : mv.dump();
      continue;
    }
    if (!v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      return errorf("{}: error: entry '{}' lacks dtype, shape or data_offsets", path, name);
    SafetensorsEntry e;
    e.name = name;
    const nlohmann::json &dt = v["dtype"], &shape = v["shape"], &offsets = v["data_offsets"];
    if (!dt.is_string() || safetensorsElementSize(dt.get<std::string>()) == 0)
      return errorf("{}: error: entry '{}' has an unknown dtype {}", path, name, dt.dump());
    e.dtype = dt.get<std::string>();
    // Shapes and offsets are checked before any size is computed from them:
    // a negative dim or a product past 64 bits is a corrupt header.
    int64_t bytes = safetensorsElementSize(e.dtype);
    bool shapeOk = shape.is_array();
    for (size_t i = 0; shapeOk && i < shape.size(); ++i) {
      shapeOk = shape[i].is_number_integer() && shape[i].get<int64_t>() >= 0;
      int64_t d = shapeOk ? shape[i].get<int64_t>() : 0;
      shapeOk = shapeOk && (d == 0 || bytes <= std::numeric_limits<int64_t>::max() / d);
      if (shapeOk) {
        e.shape.push_back(d);
        bytes *= d;
      }
    }
    if (!shapeOk)
      return errorf("{}: error: entry '{}' has a bad shape {}: expected non-negative integers "
                    "whose product fits in 64 bits",
                    path, name, shape.dump());
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      return errorf("{}: error: entry '{}' has bad data_offsets {}: expected [begin, end]", path,
                    name, offsets.dump());
    std::vector<uint64_t> off = {offsets[0].get<uint64_t>(), offsets[1].get<uint64_t>()};
    if (off[0] > off[1] || off[1] > data.size())
      return errorf("{}: error: entry '{}' points past the end of the file (truncated?)", path,
                    name);
    if (off[1] - off[0] != static_cast<uint64_t>(bytes))
      return errorf("{}: error: entry '{}' size does not match dtype {} and its shape", path, name,
                    e.dtype);
    e.bytes = data.substr(off[0], off[1] - off[0]);
    entries.push_back(std::move(e));
  }
  return checkDisjoint(path, data, entries);
}

Expected<std::shared_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return errorf("{}: error: cannot open file: {}", path, std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ < 8) {
    ::close(fd);
    return errorf("{}: error: not a safetensors file (only {} bytes)", path, file->size_);
  }
  file->map_ = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (file->map_ == MAP_FAILED) {
    file->map_ = nullptr;
    return errorf("{}: error: cannot map file: {}", path, std::strerror(errno));
  }
  NNSC_RETURN_IF_ERROR(file->parse({static_cast<const char *>(file->map_), file->size_}, path));
  return file;
}

Expected<std::shared_ptr<SafetensorsFile>> SafetensorsFile::fromBytes(std::string bytes,
                                                                      const std::string &name) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->owned_ = std::move(bytes);
  if (file->owned_.size() < 8)
    return errorf("{}: error: not a safetensors file (only {} bytes)", name, file->owned_.size());
  NNSC_RETURN_IF_ERROR(file->parse(file->owned_, name));
  return file;
}

Status SafetensorsFile::parse(std::string_view all, const std::string &path) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(all[i]);
  if (n > all.size() - 8)
    return errorf("{}: error: not a safetensors file (header length {} exceeds file size)", path,
                  n);
  return parseHeader(path, all.substr(8, n), all.substr(8 + n), entries_, metadata_);
}

} // namespace nnsc
