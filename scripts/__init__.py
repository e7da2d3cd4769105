"""Build, serve and analysis scripts. Run them as ``python -m scripts.<name>``."""

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HANDLERS_DIR = REPO_ROOT / "handlers"
if str(HANDLERS_DIR) not in sys.path:
    sys.path.insert(0, str(HANDLERS_DIR))
