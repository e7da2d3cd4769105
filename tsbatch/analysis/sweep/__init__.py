"""The in-process batch-size sweep (``make sweep``, ``tsbatch sweep``).

Modules by concern: ``inputs`` (scenarios of real inputs), ``swept`` (the models),
``measure`` (timing, memory, drift of one point), ``run`` (curves over batch sizes and
precisions), ``rows`` (sweep.csv), ``plot`` and ``report`` (the PNGs and summary.md),
``cli`` (the command). Callers outside the package use the names below.
"""

from tsbatch.analysis.sweep.cli import main
from tsbatch.analysis.sweep.rows import curves, read_csv

__all__ = ["curves", "main", "read_csv"]
