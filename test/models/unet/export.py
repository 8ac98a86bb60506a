"""Export the zoo's unet model: export.py --config tiny --out DIR [--meta] [--seed N] [--batch B]
(examples/export_common.py: model.pt, inputs.yaml and, without --meta, state_dict.pt)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples"))
sys.path.insert(0, HERE)
from export_common import export, parse_args, seed_everything  # noqa: E402
from model import CONFIGS, build, input_specs  # noqa: E402


def main():
    args = parse_args(__doc__, CONFIGS, default_config="tiny")
    seed_everything(args.seed)
    cfg = CONFIGS[args.config]
    model = build(cfg, device="meta" if args.meta else None)
    export(model, input_specs(cfg, args.batch), args)


if __name__ == "__main__":
    main()
