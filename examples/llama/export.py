"""Export the Llama-3 example: export.py --config tiny|default|8b|8b-128k|70b --out DIR [--meta]
           [--seed N] [--batch B] [--attention auto|sdpa|explicit] [--layers L]
           [--causal mask|flag] (SDPA's causal mask: an additive tensor or is_causal)"""
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from export_common import export, parse_args, seed_everything  # noqa: E402
from model import CONFIGS, Llama, input_specs  # noqa: E402


def main():
    layers = None
    if "--layers" in sys.argv:  # the config's shapes at another depth (autodist's depth series)
        i = sys.argv.index("--layers")
        layers = int(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    causal = None
    if "--causal" in sys.argv:  # SDPA's causal form (LlamaConfig.causal)
        i = sys.argv.index("--causal")
        causal = sys.argv[i + 1] if i + 1 < len(sys.argv) else ""
        if causal not in ("mask", "flag"):
            sys.exit("export.py: error: --causal must be mask or flag, not %r" % causal)
        del sys.argv[i:i + 2]
    args = parse_args(__doc__, CONFIGS, attention=True)
    seed_everything(args.seed)
    cfg = dataclasses.replace(CONFIGS[args.config], attention=args.attention)
    if layers is not None:
        cfg = dataclasses.replace(cfg, n_layers=layers)
    if causal is not None:
        cfg = dataclasses.replace(cfg, causal=causal)
    model = Llama(cfg, device="meta" if args.meta else None)
    export(model, input_specs(cfg, args.batch), args)


if __name__ == "__main__":
    main()
