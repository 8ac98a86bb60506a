#pragma once
// The runtime tests' precompiled header: LibTorch, parsed once for the whole
// binary instead of once per file (about 25 s a file on this machine). It
// ends as CommTestUtil.h does: glog's CHECK undefined, so that Catch2's, which
// every file includes after this, is the CHECK the tests mean.
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>
#undef CHECK
