"""Sanity-check an exported example: check_export.py DIR [DIR ...]

Loads DIR/model.pt, builds sample inputs from DIR/inputs.yaml (on the meta device when the
archive's parameters are meta), runs it and checks that the first output is a 0-dim loss.
When DIR/state_dict.pt exists, also checks the archive's tensors equal the saved state dict.
"""
import os
import sys

import torch

from export_common import sample_input


def read_inputs_yaml(path):
    """Minimal reader for the inputs.yaml format written by export_common.write_inputs_yaml."""
    specs, cur = [], None
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line.startswith("- name:"):
            cur = {"name": line.split(":", 1)[1].strip()}
            specs.append(cur)
        elif cur is not None and ":" in line:
            k, v = (x.strip() for x in line.split(":", 1))
            if v.startswith("["):
                v = [float(x) if "." in x else int(x) for x in v.strip("[]").split(",")]
            cur[k] = v
    return specs


def check(d):
    m = torch.jit.load(os.path.join(d, "model.pt"))  # no map_location: see README
    specs = read_inputs_yaml(os.path.join(d, "inputs.yaml"))
    names = [a.name for a in m.forward.schema.arguments[1:]]
    assert names == [s["name"] for s in specs], (names, specs)
    device = next(m.parameters()).device.type
    torch.manual_seed(0)
    out = m(*[sample_input(s, device) for s in specs])
    loss = out[0] if isinstance(out, tuple) else out
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0, loss
    msg = "%s: ok, device=%s, loss=%s" % (d, device, "meta" if device == "meta" else float(loss))
    sd_path = os.path.join(d, "state_dict.pt")
    if os.path.exists(sd_path):
        sd = torch.load(sd_path, weights_only=True)
        ts = dict(m.named_parameters())
        ts.update(dict(m.named_buffers()))
        for k, v in ts.items():
            assert torch.equal(v, sd[k]), k
        msg += ", %d/%d state_dict entries match" % (len(ts), len(sd))
    print(msg)


if __name__ == "__main__":
    for d in sys.argv[1:]:
        check(d)
