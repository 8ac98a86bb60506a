#pragma once
/// A measured communication table (docs/profile-comm.md): per collective,
/// group size and placement, the time of one operation over message sizes.
/// This is the writer's side; lib/Cost reads the same format. No LibTorch.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc::profile {

/// The collectives a table covers, in the order the tools measure them.
enum class Collective { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, SendRecv };

/// Every collective, in table order.
const std::vector<Collective> &allCollectives();

/// The table's name: "all_reduce", "all_gather", "reduce_scatter",
/// "all_to_all", "broadcast", "send_recv".
const char *collectiveName(Collective c);

/// Parses a comma-separated list of collective names, or "all". Duplicates are
/// dropped; the result is in table order. The error names the bad value and
/// lists the accepted ones.
Expected<std::vector<Collective>> parseCollectives(const std::string &list);

/// One curve: time of one operation on a group of `group` ranks.
struct CommCurve {
  std::string collective; ///< collectiveName()
  int group = 2;          ///< ranks in the group (>= 2)
  std::string placement;  ///< "intra" (one host) or "inter"
  /// [bytes, seconds]; bytes strictly increasing, seconds > 0. bytes follows
  /// nccl-tests' "size": the larger of one rank's input and output buffers.
  std::vector<std::pair<int64_t, double>> points;
};

struct CommTable {
  int version = 1;
  std::string backend; ///< "gloo" or "nccl"
  std::string device;  ///< a device spec's name, e.g. "cpu-local"
  std::vector<std::string> sources;
  std::vector<CommCurve> curves;
};

/// The table as YAML text, deterministic; every float has a '.' and a signed
/// exponent so that YAML 1.1 readers (PyYAML) read it as a number too.
std::string formatCommTable(const CommTable &table);

/// A positive number in 4 significant digits, scientific: "1.9e-05", "2.0e+10".
std::string formatReal(double value);

} // namespace nnsc::profile
