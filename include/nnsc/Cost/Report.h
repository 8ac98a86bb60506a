#pragma once
/// Text forms of the cost model's results (`nnsc-plan --print`):
///
///   memory per device (fp32 adamw, zero 0; activations of one micro-batch):
///     device 0: params 116.8 KiB (29,888 elements), grads 108.8 KiB, optimizer
///       217.5 KiB, activations 1.2 MiB, transient 96.0 KiB; total 1.7 MiB
///   step time per device (h100-sxm, 1 micro-batch): ...

#include <ostream>
#include <string>
#include <vector>

#include "nnsc/Cost/Memory.h"
#include "nnsc/Cost/StepTime.h"

namespace nnsc::cost {

/// "1.5 KiB", "25.0 MiB", "12 B": binary units with one decimal.
std::string formatBytes(double bytes);
/// "12.3 us", "4.56 ms", "1.23 s".
std::string formatSeconds(double seconds);
/// "29,888".
std::string groupDigits(int64_t n);

/// The memory section; `capacity` > 0 adds the device's capacity and a
/// warning per device over it.
void printMemory(const std::vector<DeviceMemory> &memory, const MemoryOptions &options,
                 double capacity, std::ostream &os);

/// The step-time section for `device` (its name in the header).
void printStepTime(const std::vector<StepBreakdown> &steps, const DeviceSpec &device,
                   std::ostream &os);

} // namespace nnsc::cost
