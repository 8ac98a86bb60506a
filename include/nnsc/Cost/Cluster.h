#pragma once
/// The machine a plan is priced for: a device spec, how many devices share a
/// node, and the communication table between them. File format
/// (configs/clusters/*.yaml, docs/cost-model.md); paths are relative to the
/// cluster file:
///
///   device: ../devices/h100-sxm.yaml
///   devices_per_node: 8
///   comm: ../comm/h100-nvlink-ib400.yaml

#include <optional>
#include <string>
#include <vector>

#include "nnsc/Cost/CommTable.h"
#include "nnsc/Cost/DeviceSpec.h"

namespace nnsc::cost {

struct Cluster {
  DeviceSpec device;
  int devicesPerNode = 8;        ///< ranks r and s share a node iff r / n == s / n
  std::optional<CommTable> comm; ///< absent: communication is not priced

  /// Intra when every rank of `ranks` is on one node.
  Placement placementOf(const std::vector<int> &ranks) const;
  /// Seconds of `c` over `ranks` (global ranks), `bytes` per rank as in
  /// CommTable::time. Group size 1 costs 0. Errors: no comm table, or a
  /// collective the table lacks.
  Expected<double> commTime(Collective c, int64_t bytes, const std::vector<int> &ranks) const;
};

/// Reads a cluster file and the device spec and comm table it names.
Expected<Cluster> loadCluster(const std::string &path);

/// A cluster from separate files (nnsc-plan --device / --comm); `commPath`
/// may be empty (no comm table).
Expected<Cluster> makeCluster(const std::string &devicePath, const std::string &commPath,
                              int devicesPerNode);

/// The cluster a tool's flags name: `clusterPath` (a cluster file) if set,
/// else `devicePath` with `commPath` (may be empty), else none. Errors: a
/// comm table without a device spec, and those of the loaders.
Expected<std::optional<Cluster>> selectCluster(const std::string &clusterPath,
                                               const std::string &devicePath,
                                               const std::string &commPath, int devicesPerNode);

} // namespace nnsc::cost
