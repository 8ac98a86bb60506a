#pragma once
/// Communication tables: measured (or published) times of collectives over
/// message size, per collective, group size and placement, and the lookup
/// the planner prices communication with. Format in docs/cost-model.md:
///
///   version: 1
///   backend: nccl                 # nccl | gloo
///   device: h100-sxm
///   sources: ["..."]
///   curves:
///     - collective: all_reduce    # all_reduce all_gather reduce_scatter all_to_all
///                                 # broadcast send_recv
///       group: 8                  # ranks in the group (>= 2)
///       placement: intra          # intra (one node) | inter (across nodes)
///       points:                   # [bytes, seconds]: bytes strictly increasing
///         - [1024, 1.9e-5]
///
/// `bytes` is nccl-tests' "size": the larger of one rank's input and output
/// buffers (all_gather: the gathered output; reduce_scatter: the full input;
/// send_recv: the message).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc::cost {

enum class Collective { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, SendRecv };
enum class Placement { Intra, Inter };

/// "all_reduce", ... as in the file format.
const char *collectiveName(Collective c);
std::optional<Collective> parseCollective(const std::string &name);
/// "intra" | "inter".
const char *placementName(Placement p);

/// Bytes each rank sends per byte of `bytes` (nccl-tests' bus factor):
/// all_reduce 2(g-1)/g; all_gather, reduce_scatter, all_to_all (g-1)/g;
/// broadcast and send_recv 1. 0 for g <= 1.
double busFactor(Collective c, int group);

/// One measured curve: time over message size.
struct CommCurve {
  Collective collective = Collective::AllReduce;
  int group = 2;
  Placement placement = Placement::Intra;
  std::vector<std::pair<double, double>> points; ///< (bytes, seconds), bytes increasing

  /// Piecewise-linear between points; below the first point, the first
  /// point's time; above the last, extrapolated along the last two points'
  /// slope (alpha-beta), or at the last point's bandwidth when there is one.
  double time(double bytes) const;
};

class CommTable {
public:
  int version = 1;
  std::string backend; ///< "nccl" | "gloo"
  std::string device;
  std::vector<std::string> sources;
  std::string path; ///< where it was read from, for messages

  /// Adds a curve. Errors: a curve with the same (collective, group,
  /// placement), fewer than one point, bytes not increasing, times <= 0.
  Status add(CommCurve curve);
  const std::vector<CommCurve> &curves() const { return curves_; }

  /// Seconds for one `c` over `group` ranks placed as `placement`, each rank
  /// holding `bytes` (nccl-tests' size). Group 1 and 0 bytes cost 0. A group
  /// size without a curve: the curve of the nearest measured group size (the
  /// larger on a tie) with its bandwidth term scaled by the ring model's
  /// bus factor, busFactor(c, group) / busFactor(c, measured); the latency
  /// of the first point kept. Errors: no curve for (c, placement) at all;
  /// the message names the table, collective and placement.
  Expected<double> time(Collective c, int64_t bytes, int group, Placement placement) const;

  /// Whether any curve serves (c, placement).
  bool has(Collective c, Placement placement) const;

  /// What is wrong with `curve` as the table's next curve, or "" when
  /// nothing is; `badPoint` gets the 0-based index of the offending point
  /// (-1 when the curve as a whole is wrong).
  std::string problemWith(const CommCurve &curve, int &badPoint) const;

private:
  std::vector<CommCurve> curves_;
};

/// Parses a comm table; `path` names the file. Errors name the file and the
/// entry: "comm.yaml:12:9: error: curve 3 (all_gather, group 4, intra): point
/// 2: bytes 512 not above 1024".
Expected<CommTable> parseCommTable(const std::string &text, const std::string &path);
Expected<CommTable> loadCommTable(const std::string &path);

} // namespace nnsc::cost
