"""The in-process batch-size sweep (``make sweep``, ``python -m scripts.sweep``).

Modules by concern: ``inputs`` (scenarios of real inputs), ``targets`` (the models),
``measure`` (timing, memory, drift of one point), ``run`` (curves over batch sizes and
precisions), ``rows`` (sweep.csv), ``plot`` and ``report`` (the PNGs and summary.md),
``cli`` (the command). Callers use the names below.
"""

from tsbatch.analysis.sweep.cli import main
from tsbatch.analysis.sweep.measure import Budget
from tsbatch.analysis.sweep.report import write_reports
from tsbatch.analysis.sweep.rows import SweepResult, SweepRow, curves, read_csv
from tsbatch.analysis.sweep.run import run_sweep
from tsbatch.analysis.sweep.targets import Target, resolve_target

__all__ = [
    "Budget",
    "SweepResult",
    "SweepRow",
    "Target",
    "curves",
    "main",
    "read_csv",
    "resolve_target",
    "run_sweep",
    "write_reports",
]
