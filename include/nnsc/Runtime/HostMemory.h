#pragma once
/// How the C library's allocator treats the host memory that tensors free.
///
/// glibc's malloc serves a large block (above its mmap threshold, 128 KiB
/// until a freed block raises it) with a fresh mmap and gives it back with
/// munmap when freed; the top of the heap past its trim threshold goes back
/// to the kernel as well. A training step frees and reallocates the same
/// activations every step, so each step paid the kernel for the pages again:
/// page faults and page clearing were 15 % of a Llama step on 1 CPU worker
/// (perf), and keeping the memory made the step 18 % faster (204 -> 168 ms,
/// examples/llama default, 1 thread). The peak resident size is the step's
/// peak either way: training reaches it every step.

namespace nnsc::rt {

/// Keeps freed host memory in the process for reuse: blocks up to 32 MiB
/// (glibc's largest mmap threshold) come from the heap, and the heap is
/// trimmed only past 2 GiB of free top. Returns false where the C library
/// has no such settings (not glibc) or refused one.
bool keepFreedHostMemory();

} // namespace nnsc::rt
