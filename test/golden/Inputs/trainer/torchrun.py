"""torchrun.py ARGS...: torchrun (python -m torch.distributed.run) for the tests, on any torch.

Debian's PyTorch 2.x is built without libuv, yet torchrun's agent creates its
TCPStore with the binding's default use_libuv=True (no flag or variable reaches
that call), so Debian 13's own torchrun cannot start. Where a libuv store
cannot start, this makes the classic store the default before torchrun loads;
everything else is torchrun unchanged. nnsc-run itself needs none of this.
"""
import sys

import torch.distributed as dist


def libuv_missing():
    try:
        dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=True)
    except TypeError:  # torch < 2.2: no libuv switch at all
        return False
    except RuntimeError:
        return True
    return False


if libuv_missing():
    class ClassicTCPStore(dist.TCPStore):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    dist.TCPStore = ClassicTCPStore

from torch.distributed.run import main  # noqa: E402  (after the patch: it imports TCPStore)

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    sys.exit(main())
