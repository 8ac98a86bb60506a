// Cluster descriptions: a device spec, devices per node, a comm table.
#include "nnsc/Cost/Cluster.h"

#include <filesystem>

#include <fmt/format.h>

#include "nnsc/Cost/YamlReader.h"
#include "nnsc/Support/File.h"

namespace nnsc::cost {

Placement Cluster::placementOf(const std::vector<int> &ranks) const {
  for (int r : ranks)
    if (r / devicesPerNode != ranks.front() / devicesPerNode)
      return Placement::Inter;
  return Placement::Intra;
}

Expected<double> Cluster::commTime(Collective c, int64_t bytes,
                                   const std::vector<int> &ranks) const {
  if (ranks.size() <= 1 || bytes <= 0)
    return 0.0;
  if (!comm)
    return errorf("error: no communication table to price {} with; pass --comm TABLE.yaml",
                  collectiveName(c));
  return comm->time(c, bytes, static_cast<int>(ranks.size()), placementOf(ranks));
}

Expected<Cluster> makeCluster(const std::string &devicePath, const std::string &commPath,
                              int devicesPerNode) {
  if (devicesPerNode < 1)
    return errorf("error: devices per node must be at least 1, got {}", devicesPerNode);
  Cluster cluster;
  cluster.devicesPerNode = devicesPerNode;
  auto device = loadDeviceSpec(devicePath);
  if (!device)
    return device.status();
  cluster.device = device.take();
  if (!commPath.empty()) {
    auto comm = loadCommTable(commPath);
    if (!comm)
      return comm.status();
    cluster.comm = comm.take();
  }
  return cluster;
}

Expected<Cluster> loadCluster(const std::string &path) {
  auto text = readFile(path);
  if (!text)
    return text.status();
  YamlReader r(path, *text);
  auto root = r.root();
  if (!root)
    return root.status();
  NNSC_RETURN_IF_ERROR(r.checkKeys(*root, {"device", "devices_per_node", "comm"}, "the cluster"));
  auto dev = r.require(*root, "device", "the cluster");
  if (!dev)
    return dev.status();
  auto devPath = r.string(*dev, "device");
  if (!devPath)
    return devPath.status();
  auto perNode = r.require(*root, "devices_per_node", "the cluster");
  if (!perNode)
    return perNode.status();
  auto n = r.integer(*perNode, "devices_per_node", 1);
  if (!n)
    return n.status();
  std::string commPath;
  if (YAML::Node c = (*root)["comm"]) {
    auto v = r.string(c, "comm");
    if (!v)
      return v.status();
    commPath = *v;
  }
  namespace fs = std::filesystem;
  fs::path base = fs::path(path).parent_path();
  auto resolve = [&](const std::string &p) {
    return p.empty() || fs::path(p).is_absolute() ? p : (base / p).string();
  };
  return makeCluster(resolve(*devPath), resolve(commPath), static_cast<int>(*n));
}

Expected<std::optional<Cluster>> selectCluster(const std::string &clusterPath,
                                               const std::string &devicePath,
                                               const std::string &commPath, int devicesPerNode) {
  Expected<Cluster> cluster = Status::error("");
  if (!clusterPath.empty())
    cluster = loadCluster(clusterPath);
  else if (!devicePath.empty())
    cluster = makeCluster(devicePath, commPath, devicesPerNode);
  else if (!commPath.empty())
    return Status::error("error: --comm needs --device (the spec the table belongs to)");
  else
    return std::optional<Cluster>();
  if (!cluster)
    return cluster.status();
  return std::optional<Cluster>(cluster.take());
}

} // namespace nnsc::cost
