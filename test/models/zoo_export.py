"""The export every zoo model shares: its export.py calls main(__file__, __doc__), which reads
--config/--out/--meta/--seed/--batch (examples/export_common.py) and writes model.pt,
inputs.yaml and, without --meta, state_dict.pt for the model.py beside that export.py."""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
from export_common import export, parse_args, seed_everything  # noqa: E402


def main(export_file, doc):
    here = os.path.dirname(os.path.abspath(export_file))
    spec = importlib.util.spec_from_file_location("model", os.path.join(here, "model.py"))
    model_module = importlib.util.module_from_spec(spec)
    sys.modules["model"] = model_module
    spec.loader.exec_module(model_module)
    args = parse_args(doc, model_module.CONFIGS, default_config="tiny")
    seed_everything(args.seed)
    cfg = model_module.CONFIGS[args.config]
    model = model_module.build(cfg, device="meta" if args.meta else None)
    export(model, model_module.input_specs(cfg, args.batch), args)
