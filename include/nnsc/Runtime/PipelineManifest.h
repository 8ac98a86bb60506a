#pragma once
/// Checks of a rank manifest's pipeline section (manifest.proto Pipeline)
/// before the runtime indexes anything with its numbers. No LibTorch.

#include <string>

#include "nnsc/Support/Status.h"
#include "nnsc/manifest.pb.h"

namespace nnsc::rt {

/// Gradients of a pipeline tensor travel on its tag plus this; tags must stay
/// below it.
constexpr int kPipelineGradientTag = 1 << 20;

/// Checks `m.pipeline()` against itself and the manifest: stage and
/// micro-batch counts, every chunk's function, every sent or received
/// tensor's peer (a rank of the job), tag, dtype and shape, and every step's
/// kind, chunk and micro-batch. Errors name `path` and the offending chunk,
/// tensor or step. A manifest without a pipeline passes.
Status checkPipelineManifest(const proto::RankManifest &m, const std::string &path);

} // namespace nnsc::rt
