#pragma once
/// Intra-op threads of this process, for LibTorch and the BLAS under it.
///
/// at::set_num_threads reaches OpenMP (and MKL), not OpenBLAS: Debian's
/// libopenblas0-pthread keeps its own pool, one thread per core unless
/// OPENBLAS_NUM_THREADS says otherwise, so two workers with one thread each
/// on two cores ran four GEMM threads (measured: nanoGPT's default config,
/// dp 2, 2.13 s a step against 1.56 s with the pools at one thread).

namespace nnsc::rt {

/// Sets LibTorch's intra-op threads and, when an OpenBLAS is loaded in the
/// process (found by symbol, so no link dependency), OpenBLAS's threads.
/// `threads` must be >= 1.
void setIntraOpThreads(int threads);

} // namespace nnsc::rt
