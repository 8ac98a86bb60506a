#pragma once
// The program emitter's state (private to nnsc_codegen): tensor names, the
// constants already defined, and the source being written.

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nnsc/CodeGen/Program.h"

namespace nnsc::codegen {

class ProgramWriter {
public:
  ProgramWriter(const ir::Graph &graph, const RankLayout &layout, const ProgramInfo &info);
  /// `soleReader`: as assembleRecompute's (RecomputeRuns.h).
  Expected<std::string> write(std::map<std::string, std::string> *soleReader = nullptr);

private:
  void writeHeader();
  void writeSignature();
  void writeInputPieces();
  void writeGroupComment(const ir::Node &node);
  Status writeNode(const ir::Node &node, const RankStep &step);
  Status writeAdapter(const RankStep &step);
  Status writeStateWrite(const RankStep &step);
  Status writeReturn();
  std::string take();

  // ProgramArgs.cpp: one call's argument list.
  Expected<std::string> callArgs(const ir::Node &node, std::vector<std::string> &notes);
  Expected<std::string> valueText(const ir::Node &node, size_t argIndex,
                                  std::vector<std::string> &notes);
  Expected<std::string> tensorText(const ir::Node &node, size_t argIndex, int32_t inputIndex);
  Status defineScalarConstant(const ir::Tensor &t, const std::string &user);

  const ir::Graph &graph_;
  const RankLayout &layout_;
  const ProgramInfo &info_;
  std::map<int64_t, std::string> names_;            ///< tensor id -> variable
  std::map<int, std::string> adapterNames_;         ///< adapter index -> its result
  const std::vector<int> *inputAdapters_ = nullptr; ///< of the node being written
  std::set<int64_t> defined_;                       ///< tensors with a value so far
  std::string groupModule_, groupLoc_;              ///< what the last comment named
  std::ostringstream os_;
};

/// Whether ns::op returns Tensor[] (indexed like a tuple after the call).
bool returnsTensorList(const std::string &op);
/// "aten::linear" -> "torch.linear"; "myops::f" -> "myops.f"; aten::view (and
/// _unsafe_view) with a size -> "torch.reshape" (argument `shape`, see
/// argumentName); aten::view_as -> "torch.reshape_as".
std::string calleeName(const std::string &op, const std::vector<ir::Argument> &args);
/// The keyword under which `arg` of `op` is passed (renamed for rewritten ops).
std::string argumentName(const std::string &op, const ir::Argument &arg);

} // namespace nnsc::codegen
