"""Export the BatchNorm classifier: export.py --config tiny --out DIR (see model.py)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples"))
sys.path.insert(0, HERE)
from export_common import export, parse_args, seed_everything  # noqa: E402
from model import CONFIGS, BnMlp, input_specs  # noqa: E402


def main():
    args = parse_args(__doc__, CONFIGS, default_config="tiny")
    seed_everything(args.seed)
    cfg = CONFIGS[args.config]
    export(BnMlp(cfg), input_specs(cfg, args.batch), args)


if __name__ == "__main__":
    main()
