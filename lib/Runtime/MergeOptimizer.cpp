// nnsc-merge-ckpt's optimizer part: whole-parameter optimizer states from
// every rank's (possibly ZeRO-partitioned) shard states.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <tuple>

#include <ATen/ATen.h>

#include "nnsc/Runtime/MergeCheckpoint.h"
#include "nnsc/Runtime/OptimizerStateKey.h"

namespace nnsc::rt {

namespace {

// The ZeRO pieces of one shard (original tensor, slice, value chunk) and
// state field, by offset.
using ShardKey =
    std::tuple<std::string, std::string, std::vector<int64_t>, std::vector<int64_t>, int>;
struct ZeroPieces {
  ShardInfo info;
  int rank = 0;
  std::map<int64_t, std::pair<at::Tensor, int>> byOffset; ///< offset -> (piece, rank)
};

Expected<at::Tensor> joinPieces(const ZeroPieces &z, const std::string &field) {
  int64_t numel = 1, at = 0;
  for (int64_t d : z.info.shape)
    numel *= d;
  std::vector<at::Tensor> parts;
  for (const auto &[offset, piece] : z.byOffset) {
    if (offset != at)
      return errorf("error: the ZeRO pieces of {} of '{}' (shard '{}') leave a gap or overlap "
                    "at element {} (rank {} holds one at {})",
                    field, z.info.originalName, z.info.localName, at, piece.second, offset);
    parts.push_back(piece.first.reshape({-1}));
    at += piece.first.numel();
  }
  if (at != numel)
    return errorf("error: the ZeRO pieces of {} of '{}' cover {} of its shard's {} elements", field,
                  z.info.originalName, at, numel);
  return at::cat(parts).view(z.info.shape);
}

Status addStep(std::map<std::string, at::Tensor> &steps, const ShardInfo &info, const at::Tensor &v,
               int rank) {
  auto [it, fresh] = steps.emplace(info.originalName + "/step", v);
  if (!fresh && !at::equal(it->second, v))
    return errorf("error: ranks disagree on the optimizer step count of '{}' (rank {} has {})",
                  info.originalName, rank, v.item<double>());
  return Status::ok();
}

// Equal bit for bit (a NaN equals itself).
bool sameBits(const at::Tensor &a, const at::Tensor &b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type())
    return false;
  at::Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

} // namespace

std::string optimizerFileOf(const std::string &mergedFile) {
  const std::string ext = ".pt";
  if (mergedFile.size() > ext.size() &&
      mergedFile.compare(mergedFile.size() - ext.size(), ext.size(), ext) == 0)
    return mergedFile.substr(0, mergedFile.size() - ext.size()) + ".optim.pt";
  return mergedFile + ".optim.pt";
}

Expected<std::map<std::string, at::Tensor>>
assembleOptimizerStates(const std::vector<RankOptimizerState> &ranks) {
  std::map<std::string, std::vector<ShardPiece>> byField;
  std::map<std::pair<std::string, ShardKey>, ZeroPieces> zero;
  std::map<std::string, at::Tensor> out;
  for (const RankOptimizerState &r : ranks) {
    std::map<std::string, const ShardInfo *> table;
    for (const ShardInfo &s : r.table)
      table[s.localName] = &s;
    for (const auto &[key, value] : r.state) {
      auto k = parseOptimizerStateKey(key);
      auto it = k ? table.find(k->param) : table.end();
      if (it == table.end())
        return errorf("error: rank {} has optimizer state '{}' for no shard of its table", r.rank,
                      key);
      ShardInfo info = *it->second;
      if (!info.trainable)
        continue;
      info.aliases.clear(); // a state belongs to the parameter, under its own name
      if (k->field == "step") {
        NNSC_RETURN_IF_ERROR(addStep(out, info, value, r.rank));
        continue;
      }
      if (k->offset < 0) {
        byField[k->field].push_back({info, value, r.rank});
        continue;
      }
      ShardKey sk{info.originalName, k->field, info.start, info.stop, info.valueIndex};
      ZeroPieces &z = zero[{k->field, sk}];
      z.info = info;
      z.rank = r.rank;
      // ZeRO in blocks (zero_ngroups): every block holds the same pieces.
      auto [held, fresh] = z.byOffset.emplace(k->offset, std::make_pair(value, r.rank));
      if (!fresh && r.zeroNgroups <= 1)
        return errorf("error: two ranks hold the ZeRO piece at {} of {} of '{}' (rank {})",
                      k->offset, k->field, info.originalName, r.rank);
      if (!fresh && !sameBits(held->second.first, value))
        return errorf("error: ranks {} and {} hold different ZeRO pieces at {} of {} of '{}'",
                      held->second.second, r.rank, k->offset, k->field, info.originalName);
    }
  }
  for (const auto &[key, z] : zero) {
    auto whole = joinPieces(z, key.first);
    if (!whole)
      return whole.status();
    byField[key.first].push_back({z.info, whole.take(), z.rank});
  }
  for (const auto &[field, pieces] : byField) {
    auto merged = assembleShards(pieces);
    if (!merged)
      return merged.status().withContext("optimizer state " + field);
    for (const auto &[name, t] : *merged)
      out[name + "/" + field] = t;
  }
  return out;
}

} // namespace nnsc::rt
