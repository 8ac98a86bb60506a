// The nnsc.* TorchScript operators: differentiable collectives over the
// groups in the registry (Comm.h). Each op is a CompositeImplicitAutograd
// kernel that applies a torch::autograd::Function, so the backward
// collective runs when the autograd graph reaches it:
//
//   all_reduce            forward allreduce      backward identity   (Megatron g)
//   identity_all_reduce   forward identity       backward allreduce  (Megatron f)
//   all_gather            forward allgather      backward reduce-scatter
//   all_gather_split      forward allgather      backward local chunk (the
//                                                gradient is whole on every member)
//   reduce_scatter        forward reduce-scatter backward allgather
//   all_to_all            forward alltoall       backward the reverse alltoall
//   split                 forward local chunk    backward allgather
//   value_split           forward the value on   backward identity (the
//                         group rank 0, zeros    gradient of a partial sum
//                         elsewhere (local)      is whole)
//
// and the two statements around a piece of a split random op, rng_fork and
// rng_join (RngStreams.h).
//
// Results are new tensors (never views of the input). A failure throws a
// c10::Error naming the op and the group; Program::run turns it into a Status.
#include <torch/torch.h>

#include <functional>

#include <fmt/format.h>

#include "nnsc/Runtime/Collectives.h"
#include "nnsc/Runtime/Recompute.h"
#include "nnsc/Runtime/RngStreams.h"

namespace nnsc::rt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

CommBackend &lookup(int64_t id, const char *op) {
  std::shared_ptr<CommBackend> group = findGroup(static_cast<int>(id));
  TORCH_CHECK(group,
              fmt::format("nnsc.{}: this rank has no communication group {} (registered: {})", op,
                          id, fmt::join(registeredGroups(), ", ")));
  return *group; // the registry keeps it alive while the world lives
}

at::Tensor valueOrThrow(Expected<at::Tensor> result, const char *op, int64_t group) {
  TORCH_CHECK(result.isOk(),
              fmt::format("nnsc.{}(group={}): {}", op, group, result.status().message()));
  return result.take();
}

// Backends move bytes of numeric types; a bool mask (an attention mask
// computed on a split tensor) travels as uint8.
at::Tensor moved(const at::Tensor &x,
                 const std::function<Expected<at::Tensor>(const at::Tensor &)> &f, const char *op,
                 int64_t g) {
  if (x.scalar_type() != at::kBool)
    return valueOrThrow(f(x), op, g);
  return valueOrThrow(f(x.to(at::kByte)), op, g).to(at::kBool);
}

at::Tensor allReduce(const at::Tensor &x, int64_t g, const char *op) {
  return valueOrThrow(allReduceTensor(lookup(g, op), x), op, g);
}
at::Tensor allGather(const at::Tensor &x, int64_t dim, int64_t g, const char *op) {
  CommBackend &group = lookup(g, op);
  return moved(
      x, [&](const at::Tensor &t) { return allGatherTensor(group, t, dim); }, op, g);
}
at::Tensor reduceScatter(const at::Tensor &x, int64_t dim, int64_t g, const char *op) {
  return valueOrThrow(reduceScatterTensor(lookup(g, op), x, dim), op, g);
}
at::Tensor allToAll(const at::Tensor &x, int64_t split, int64_t concat, int64_t g, const char *op) {
  CommBackend &group = lookup(g, op);
  return moved(
      x, [&](const at::Tensor &t) { return allToAllTensor(group, t, split, concat); }, op, g);
}

struct AllReduceFn : torch::autograd::Function<AllReduceFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t group) {
    return allReduce(x, group, "all_reduce");
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

struct IdentityAllReduceFn : torch::autograd::Function<IdentityAllReduceFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t group) {
    lookup(group, "identity_all_reduce"); // fail in forward, not only in backward
    ctx->saved_data["group"] = group;
    return x.clone(at::MemoryFormat::Contiguous);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    int64_t group = ctx->saved_data["group"].toInt();
    return {allReduce(grads[0], group, "identity_all_reduce (backward)"), at::Tensor()};
  }
};

struct AllGatherFn : torch::autograd::Function<AllGatherFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t dim, int64_t group) {
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["group"] = group;
    return allGather(x, dim, group, "all_gather");
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    int64_t dim = ctx->saved_data["dim"].toInt(), group = ctx->saved_data["group"].toInt();
    return {reduceScatter(grads[0], dim, group, "all_gather (backward)"), at::Tensor(),
            at::Tensor()};
  }
};

struct AllGatherSplitFn : torch::autograd::Function<AllGatherSplitFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t dim, int64_t group) {
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["group"] = group;
    return allGather(x, dim, group, "all_gather_split");
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    int64_t dim = ctx->saved_data["dim"].toInt(), group = ctx->saved_data["group"].toInt();
    const char *op = "all_gather_split (backward)";
    return {valueOrThrow(chunkTensor(lookup(group, op), grads[0], dim), op, group), at::Tensor(),
            at::Tensor()};
  }
};

struct ReduceScatterFn : torch::autograd::Function<ReduceScatterFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t dim, int64_t group) {
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["group"] = group;
    return reduceScatter(x, dim, group, "reduce_scatter");
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    int64_t dim = ctx->saved_data["dim"].toInt(), group = ctx->saved_data["group"].toInt();
    return {allGather(grads[0], dim, group, "reduce_scatter (backward)"), at::Tensor(),
            at::Tensor()};
  }
};

struct AllToAllFn : torch::autograd::Function<AllToAllFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t splitDim,
                            int64_t concatDim, int64_t group) {
    ctx->saved_data["split"] = splitDim;
    ctx->saved_data["concat"] = concatDim;
    ctx->saved_data["group"] = group;
    return allToAll(x, splitDim, concatDim, group, "all_to_all");
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    int64_t split = ctx->saved_data["split"].toInt(), concat = ctx->saved_data["concat"].toInt();
    int64_t group = ctx->saved_data["group"].toInt();
    // The reverse exchange: split what was concatenated, concatenate what was split.
    return {allToAll(grads[0], concat, split, group, "all_to_all (backward)"), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

struct SplitFn : torch::autograd::Function<SplitFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t dim, int64_t group) {
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["group"] = group;
    return valueOrThrow(chunkTensor(lookup(group, "split"), x, dim), "split", group);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    int64_t dim = ctx->saved_data["dim"].toInt(), group = ctx->saved_data["group"].toInt();
    return {allGather(grads[0], dim, group, "split (backward)"), at::Tensor(), at::Tensor()};
  }
};

// R -> V: the chunks add up to `x` exactly (one member adds it, the others
// add zeros), as a row-parallel linear adds its bias once.
struct ValueSplitFn : torch::autograd::Function<ValueSplitFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t group) {
    bool keeps = lookup(group, "value_split").rank() == 0;
    return keeps ? x.clone(at::MemoryFormat::Contiguous) : at::zeros_like(x);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

at::Tensor allReduceOp(const at::Tensor &x, int64_t group) { return AllReduceFn::apply(x, group); }
at::Tensor identityAllReduceOp(const at::Tensor &x, int64_t group) {
  return IdentityAllReduceFn::apply(x, group);
}
at::Tensor allGatherOp(const at::Tensor &x, int64_t dim, int64_t group) {
  return AllGatherFn::apply(x, dim, group);
}
at::Tensor allGatherSplitOp(const at::Tensor &x, int64_t dim, int64_t group) {
  return AllGatherSplitFn::apply(x, dim, group);
}
at::Tensor reduceScatterOp(const at::Tensor &x, int64_t dim, int64_t group) {
  return ReduceScatterFn::apply(x, dim, group);
}
at::Tensor allToAllOp(const at::Tensor &x, int64_t splitDim, int64_t concatDim, int64_t group) {
  return AllToAllFn::apply(x, splitDim, concatDim, group);
}
at::Tensor splitOp(const at::Tensor &x, int64_t dim, int64_t group) {
  return SplitFn::apply(x, dim, group);
}
at::Tensor valueSplitOp(const at::Tensor &x, int64_t group) {
  return ValueSplitFn::apply(x, group);
}

} // namespace

void linkNnscOps() { linkRecomputeOp(); }

} // namespace nnsc::rt

TORCH_LIBRARY(nnsc, m) {
  using namespace nnsc::rt;
  constexpr auto kKey = c10::DispatchKey::CompositeImplicitAutograd;
  m.def("all_reduce(Tensor x, int group) -> Tensor");
  m.impl("all_reduce", kKey, TORCH_FN(allReduceOp));
  m.def("identity_all_reduce(Tensor x, int group) -> Tensor");
  m.impl("identity_all_reduce", kKey, TORCH_FN(identityAllReduceOp));
  m.def("all_gather(Tensor x, int dim, int group) -> Tensor");
  m.impl("all_gather", kKey, TORCH_FN(allGatherOp));
  m.def("all_gather_split(Tensor x, int dim, int group) -> Tensor");
  m.impl("all_gather_split", kKey, TORCH_FN(allGatherSplitOp));
  m.def("reduce_scatter(Tensor x, int dim, int group) -> Tensor");
  m.impl("reduce_scatter", kKey, TORCH_FN(reduceScatterOp));
  m.def("all_to_all(Tensor x, int split_dim, int concat_dim, int group) -> Tensor");
  m.impl("all_to_all", kKey, TORCH_FN(allToAllOp));
  m.def("split(Tensor x, int dim, int group) -> Tensor");
  m.impl("split", kKey, TORCH_FN(splitOp));
  // Statements with effects on the default generator: CONSERVATIVE keeps
  // TorchScript from dropping them (they return nothing) or moving them.
  m.def(torch::schema("rng_fork(int node, int piece) -> ()", c10::AliasAnalysisKind::CONSERVATIVE),
        [](int64_t node, int64_t piece) { rngFork(node, piece); });
  m.def(torch::schema("rng_join() -> ()", c10::AliasAnalysisKind::CONSERVATIVE), [] { rngJoin(); });
  m.def("value_split(Tensor x, int group) -> Tensor");
  m.impl("value_split", kKey, TORCH_FN(valueSplitOp));
}
