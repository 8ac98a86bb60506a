#pragma once
// Recompute groups in a rank program (private to nnsc_codegen): which steps
// run as one recompute function, and the text that calls it.

#include <map>
#include <string>
#include <vector>

#include "nnsc/CodeGen/RankLayout.h"

namespace nnsc::codegen {

/// A contiguous stretch of the program's steps [begin, end) in one recompute
/// group: its node steps and the adapters between them (adapters before the
/// first node and after the last stay outside). A group whose steps another
/// node interrupts is cut into several runs; run k > 0 of group g is named
/// recompute_g_k.
struct RecomputeRun {
  int group = -1;
  int index = 0; ///< the run's ordinal within its group
  size_t begin = 0, end = 0;
  std::string functionName() const;
};

/// The runs of `layout`'s steps, in program order.
std::vector<RecomputeRun> findRecomputeRuns(const RankLayout &layout);

/// The program's statements written step by step, to be regrouped.
struct ProgramPieces {
  std::string head;                ///< header comments, signature, input narrowing
  std::vector<std::string> params; ///< the forward's argument names (without device)
  std::vector<std::string> steps;  ///< the statements of each step, in order
  std::string tail;                ///< the return statement
};

/// The program with every run moved into a function of its own after
/// `forward`, called as `rcN = nnsc.recompute("recompute_g", [inputs], device)`
/// and unpacked into the variables the rest of the program reads. A run's
/// inputs are the variables it reads that were defined before it (weight
/// shards included, so their gradients flow); its outputs those it defines
/// that later statements read. A run nothing reads afterwards stays inline.
/// `soleReader`, when given, receives each variable that exactly one
/// recompute function reads and no other statement: variable -> function.
Expected<std::string> assembleRecompute(const ProgramPieces &pieces,
                                        const std::vector<RecomputeRun> &runs,
                                        const RankLayout &layout,
                                        std::map<std::string, std::string> *soleReader = nullptr);

} // namespace nnsc::codegen
