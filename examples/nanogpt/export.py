"""Export the nanoGPT example: export.py --config tiny|small|default|gpt2|gpt3-1.3b|gpt3-2.6b|gpt3-6.7b --out DIR [--meta] [--seed N] [--batch B]
           [--attention auto|sdpa|explicit] [--dropout P] [--layers N]"""
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from export_common import export, parse_args, seed_everything  # noqa: E402
from model import CONFIGS, GPT, input_specs  # noqa: E402


def main():
    layers = None
    if "--layers" in sys.argv:  # the config's depth, changed (pipeline tests)
        i = sys.argv.index("--layers")
        layers = int(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    args = parse_args(__doc__, CONFIGS, attention=True, dropout=True)
    seed_everything(args.seed)
    cfg = dataclasses.replace(CONFIGS[args.config], attention=args.attention)
    if layers is not None:
        cfg = dataclasses.replace(cfg, n_layer=layers)
    if args.dropout is not None:
        cfg = dataclasses.replace(cfg, dropout=args.dropout)
    model = GPT(cfg, device="meta" if args.meta else None)
    export(model, input_specs(cfg, args.batch), args)


if __name__ == "__main__":
    main()
