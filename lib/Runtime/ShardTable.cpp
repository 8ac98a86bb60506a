#include "nnsc/Runtime/ShardTable.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "JsonInts.h"
#include "nnsc/Support/File.h"
#include "nnsc/manifest.pb.h"

namespace nnsc::rt {

namespace {

// What the runtime loops over or allocates from a manifest, checked first:
// the world size (a merge looks for every rank's files), the rank, and each
// input's size (the trainer allocates the batches), against this machine.
Status checkManifestCounts(const proto::RankManifest &m, const std::string &path) {
  if (m.world_size() < 1 || m.world_size() > kMaxJobRanks)
    return errorf("{}: error: bad manifest: world_size {}; expected 1 to {} ranks", path,
                  m.world_size(), kMaxJobRanks);
  if (m.rank() < 0 || m.rank() >= m.world_size())
    return errorf("{}: error: bad manifest: rank {} of world_size {}", path, m.rank(),
                  m.world_size());
  double memory = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  for (const auto &in : m.inputs()) {
    double bytes = 8; // at most 8 bytes an element
    for (int64_t d : in.shape())
      bytes *= d < 0 ? -1 : double(d);
    if (bytes < 0 || bytes > memory)
      return errorf("{}: error: bad manifest: input '{}' of shape [{}] needs {:.1f} GiB, more than "
                    "this machine's {:.1f} GiB",
                    path, in.name(), fmt::join(in.shape(), ", "), bytes / 1073741824.0,
                    memory / 1073741824.0);
  }
  return Status::ok();
}

} // namespace

Expected<proto::RankManifest> loadRankManifest(const std::string &path) {
  auto bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  proto::RankManifest m;
  if (!m.ParseFromString(*bytes))
    return errorf("{}: error: not a rank manifest (protobuf nnsc.proto.RankManifest)", path);
  NNSC_RETURN_IF_ERROR(checkManifestCounts(m, path));
  return m;
}

std::string safetensorsCodeOfProtoDType(int dtype) {
  switch (dtype) {
  case proto::FLOAT32:
    return "F32";
  case proto::FLOAT16:
    return "F16";
  case proto::BFLOAT16:
    return "BF16";
  case proto::FLOAT64:
    return "F64";
  case proto::INT64:
    return "I64";
  case proto::INT32:
    return "I32";
  case proto::INT16:
    return "I16";
  case proto::INT8:
    return "I8";
  case proto::UINT8:
    return "U8";
  case proto::BOOL:
    return "BOOL";
  default:
    return "";
  }
}

std::vector<ShardInfo> shardsOfManifest(const proto::RankManifest &m) {
  std::vector<ShardInfo> out;
  for (const auto &s : m.shards()) {
    ShardInfo i;
    i.localName = s.local_name();
    i.originalName = s.original_name();
    i.aliases.assign(s.aliases().begin(), s.aliases().end());
    i.fullShape.assign(s.full_shape().begin(), s.full_shape().end());
    i.shape.assign(s.shape().begin(), s.shape().end());
    if (s.has_slice() && s.slice().start_size() == s.full_shape_size()) {
      i.start.assign(s.slice().start().begin(), s.slice().start().end());
      i.stop.assign(s.slice().stop().begin(), s.slice().stop().end());
      if (s.slice().blocks_size() == s.full_shape_size())
        i.blocks.assign(s.slice().blocks().begin(), s.slice().blocks().end());
    } else {
      i.start.assign(i.fullShape.size(), 0);
      i.stop = i.fullShape;
    }
    i.valueIndex = s.has_slice() ? s.slice().value_index() : 0;
    i.valueChunks = s.has_slice() && s.slice().value_chunks() > 0 ? s.slice().value_chunks() : 1;
    i.dtype = safetensorsCodeOfProtoDType(s.dtype());
    i.trainable = s.trainable();
    i.replicas = s.replicas() > 0 ? s.replicas() : 1;
    i.reducer = s.reducer();
    out.push_back(std::move(i));
  }
  return out;
}

nlohmann::json shardsToJson(const std::vector<ShardInfo> &shards) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto &s : shards)
    arr.push_back({{"local_name", s.localName},
                   {"original_name", s.originalName},
                   {"aliases", s.aliases},
                   {"full_shape", s.fullShape},
                   {"shape", s.shape},
                   {"start", s.start},
                   {"stop", s.stop},
                   {"blocks", s.blocks},
                   {"value_index", s.valueIndex},
                   {"value_chunks", s.valueChunks},
                   {"dtype", s.dtype},
                   {"trainable", s.trainable},
                   {"replicas", s.replicas},
                   {"reducer", s.reducer}});
  return arr;
}

Expected<std::vector<ShardInfo>> shardsFromJson(const nlohmann::json &j, const std::string &file) {
  std::vector<ShardInfo> out;
  try {
    for (const auto &e : j) {
      ShardInfo s;
      s.localName = e.at("local_name").get<std::string>();
      s.originalName = e.at("original_name").get<std::string>();
      s.aliases = e.at("aliases").get<std::vector<std::string>>();
      s.fullShape = jsonIntsAt(e, "full_shape");
      s.shape = jsonIntsAt(e, "shape");
      s.start = jsonIntsAt(e, "start");
      s.stop = jsonIntsAt(e, "stop");
      s.blocks = e.contains("blocks") ? jsonIntsAt(e, "blocks") : std::vector<int64_t>{};

      s.valueIndex = jsonIntAt<int>(e, "value_index");
      s.valueChunks = jsonIntAt<int>(e, "value_chunks");
      s.dtype = e.at("dtype").get<std::string>();
      s.trainable = e.at("trainable").get<bool>();
      s.replicas = jsonIntAt<int>(e, "replicas");
      s.reducer = e.contains("reducer") ? jsonIntAt<int>(e, "reducer") : -1;
      out.push_back(std::move(s));
    }
  } catch (const nlohmann::json::exception &ex) {
    return errorf("{}: error: bad shard table: {}", file, ex.what());
  }
  return out;
}

} // namespace nnsc::rt
