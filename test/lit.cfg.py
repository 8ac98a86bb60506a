# lit configuration of nnsc's golden tests (test/golden/<tool>/*.test).
import os
import lit.formats

config.name = "nnsc-golden"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".test"]
config.test_source_root = os.path.join(config.nnsc_src_root, "test", "golden")
config.excludes = ["Inputs"]

config.environment["PATH"] = os.pathsep.join(
    [config.nnsc_bin_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
config.environment["OMP_NUM_THREADS"] = "1"

# asan: the tools are built with AddressSanitizer (-DNNSC_SANITIZE=ON), whose
# shadow memory rules out tests that cap the address space with `ulimit -v`.
if getattr(config, "sanitized", False):
    config.available_features.add("asan")

config.substitutions.append(("%python", config.python))
config.substitutions.append(("%myops_lib", config.myops_lib))
config.substitutions.append(("%scripts", os.path.join(config.nnsc_src_root, "scripts")))
config.substitutions.append(("%examples", os.path.join(config.nnsc_src_root, "examples")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%models", os.path.join(config.nnsc_src_root, "test", "models")))

# Features of the oracle Python's torch, for tests of forms 1.13 lacks:
# torch-sdpa (F.scaled_dot_product_attention, 2.0+) and torch-sdpa-gqa (its
# enable_gqa argument, 2.5+).
import subprocess

_SDPA_PROBE = r'''
import torch, torch.nn.functional as F
if hasattr(F, "scaled_dot_product_attention"):
    print("torch-sdpa")
    q, kv = torch.zeros(1, 2, 1, 1), torch.zeros(1, 1, 1, 1)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        print("torch-sdpa-gqa")
    except TypeError:
        pass
'''
for _feature in subprocess.run([config.python, "-c", _SDPA_PROBE], capture_output=True,
                               text=True).stdout.split():
    config.available_features.add(_feature)

# torch-fused-optim: torch.optim's fused=True on the CPU (2.4+), whose LibTorch
# has the kernels optimizer.fused calls (the tools and the oracle Python come
# from the same PyTorch release in each half of CI).
_FUSED_PROBE = r'''
import torch
p = torch.zeros(1, requires_grad=True)
p.grad = torch.ones(1)
try:
    torch.optim.AdamW([p], fused=True).step()
    print("torch-fused-optim")
except (TypeError, RuntimeError):
    pass
'''
for _feature in subprocess.run([config.python, "-c", _FUSED_PROBE], capture_output=True,
                               text=True).stdout.split():
    config.available_features.add(_feature)
