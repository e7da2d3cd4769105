"""Where the project's own files are, so defaults (manifest, config, data, reports) resolve
wherever a command runs: the checkout the package sits in when installed editable (as
`make install` does), else the nearest folder at or above the working directory holding a
models.yaml (a plain `pip install .` used from a checkout)."""

from pathlib import Path

MANIFEST_NAME = "models.yaml"


def project_root(package_dir: Path) -> Path:
    """The checkout around ``package_dir``, else the project the working directory is in, else it."""
    checkout = package_dir.parent
    if (checkout / MANIFEST_NAME).is_file():
        return checkout
    here = Path.cwd().resolve()
    return next((folder for folder in (here, *here.parents) if (folder / MANIFEST_NAME).is_file()), here)


REPO_ROOT = project_root(Path(__file__).resolve().parent)
HANDLERS_DIR = REPO_ROOT / "handlers"
DEFAULT_MANIFEST = REPO_ROOT / MANIFEST_NAME
DEFAULT_PROPERTIES = REPO_ROOT / "config.properties"
DEFAULT_SLA_FILE = REPO_ROOT / "loadtest" / "sla.yaml"
SERVE_DIR = REPO_ROOT / ".serve"
REPORTS_DIR = REPO_ROOT / "reports"
TUNE_DIR = REPORTS_DIR / "tune"  # `make tune` writes its reports here by default
