#pragma once
/// The per-rank program: readable TorchScript source.
///
///   # nnsc program: rank 0 of 2 (data-parallel copy 0 of 2), model GPT, plan dp
///   def forward(
///       p0: Tensor,  # transformer.wte.weight: float32[65, 32] (alias lm_head.weight)
///       idx: Tensor,  # input: int64[2, 32], batch dim 0
///       device: Device,
///   ) -> Tuple[Tensor, Tensor]:
///       # transformer.wte (Embedding) model.py:141
///       t20 = torch.embedding(p0, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False)
///       ...
///       return (t90, t87)
///
/// `torch.X` names the aten operator X and `ns.X` the operator ns::X, so the
/// source compiles with torch::jit::CompilationUnit::define under a resolver
/// that maps `torch` to the aten builtins (and `ns` to that namespace), or in
/// Python with torch.jit.CompilationUnit and `torch` bound to torch.ops.aten.
/// Recompute groups (docs/recompute.md) follow `forward` as functions of
/// their own, `def recompute_3(t19: Tensor, p2: Tensor, ..., device: Device)
/// -> List[Tensor]`, called as `nnsc.recompute("recompute_3", [...], device)`.

#include <map>
#include <string>

#include "nnsc/CodeGen/RankLayout.h"
#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"

namespace nnsc::codegen {

/// Where a program came from, for its header comment.
struct ProgramInfo {
  std::string policy;    ///< the plan's policy
  std::string graphPath; ///< the graph.pb it was generated from
};

/// The name of the program's function.
inline constexpr const char *kEntryName = "forward";

/// The source of `layout`'s program. Fails on a value it cannot write
/// (a constant without recorded data, an argument name Python reserves
/// after a keyword argument). `recomputeSoleReader`, when given, receives
/// each argument or variable that one recompute function alone reads:
/// name -> function (ZeRO-3 gathers those weight shards around its runs).
Expected<std::string>
emitProgram(const ir::Graph &graph, const RankLayout &layout, const ProgramInfo &info,
            std::map<std::string, std::string> *recomputeSoleReader = nullptr);

} // namespace nnsc::codegen
