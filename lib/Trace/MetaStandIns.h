// Meta kernels for the operators a LibTorch registers none for.
//
// LibTorch 2.x registers many meta kernels from Python (torch._meta_registrations),
// which a C++ program never loads; 1.13 lacks others. Tracing on the meta device
// must not depend on which ones a build has, so before a meta trace nnsc asks the
// dispatcher, op by op, whether a Meta kernel (or a composite one that decomposes
// into kernels that have one) exists, and registers its own where none does: it
// runs the CPU kernel on zero-stride stand-ins (one zero broadcast to the full
// shape, so a vocabulary-sized input costs no memory) and returns meta tensors of
// the result's shapes. Nested calls (aten::embedding -> aten::index_select) reach
// it through the dispatcher like any kernel.
#pragma once

#include <cstddef>

namespace nnsc::trace {

/// Registers the stand-in Meta kernel for every operator that has a CPU kernel
/// but no Meta, CompositeImplicitAutograd or CompositeExplicitAutograd kernel.
/// Idempotent: operators registered since the last call (a user op library
/// loaded in between) are covered by the next call. Returns how many operators
/// received the stand-in kernel in this call.
size_t installMetaStandIns();

/// How many operators have received the stand-in kernel so far.
size_t metaStandInCount();

} // namespace nnsc::trace
