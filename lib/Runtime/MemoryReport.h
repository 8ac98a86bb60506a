#pragma once
/// The measured memory peak of each rank beside the planner's estimate
/// (manifest memory_estimate), printed by rank 0 when training ends.
/// On the CPU the measurement is the peak of live tensor storage, counted
/// by a wrapper around LibTorch's CPU allocator (AllocationCounter.h): not
/// RSS, so the Gloo buffers, the program and the allocator's slack are out.

#include <ostream>

#include "TrainerImpl.h"

namespace nnsc::rt {

/// Starts counting (config report_memory) before the shards are loaded, so
/// parameters count: on the CPU by installing the counting allocator, on
/// CUDA by resetting the caching allocator's peak of device `cudaDevice`
/// (where this build has CUDA statistics). Does nothing otherwise.
void startMemoryMeasurement(const TrainerConfig &config, int cudaDevice);

/// All ranks: gathers every rank's peak and estimate; rank 0 prints
/// "nnsc-run: peak memory per rank (...): measured ... | estimate ...".
Status reportMemory(TrainerState &s, std::ostream &out);

/// The planner's estimate for this rank with its optimizer's states
/// (trainer config) added: the state it holds (parameters, gradients,
/// optimizer states, gradient buckets) plus the larger of the backward's
/// peak (activations and transient) and the backend's reduce-scatter staging
/// under ZeRO. Under precision.mode bf16/fp16 the estimate made on the graph
/// in their dtypes (manifest memory_estimate_16bit), plus the float32
/// masters and main gradients, buckets in grad_reduce_dtype. 0 when the
/// manifest carries none.
double estimatedBytes(const TrainerState &s);

/// Optimizer-state bytes of this rank's estimate (the trainer's optimizer,
/// and the float32 masters in mixed precision, divided over the ZeRO group).
double optimizerBytes(const TrainerState &s);

} // namespace nnsc::rt
