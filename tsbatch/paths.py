"""Where the repository's own files are: the toolkit is installed editable from the checkout,
so defaults (manifest, config, data, reports) resolve against it wherever a command runs."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HANDLERS_DIR = REPO_ROOT / "handlers"
DEFAULT_MANIFEST = REPO_ROOT / "models.yaml"
DEFAULT_PROPERTIES = REPO_ROOT / "config.properties"
DEFAULT_SLA_FILE = REPO_ROOT / "loadtest" / "sla.yaml"
SERVE_DIR = REPO_ROOT / ".serve"
INTENT_DATA_DIR = REPO_ROOT / "data" / "intents"
INTENT_RAW_DIR = INTENT_DATA_DIR / "raw"
REPORTS_DIR = REPO_ROOT / "reports"
