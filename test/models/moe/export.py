"""Export the zoo's moe model: export.py --config tiny --out DIR [--meta] [--seed N] [--batch B]
(test/models/zoo_export.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo_export import main  # noqa: E402

if __name__ == "__main__":
    main(__file__, __doc__)
