"""``make tune``: the SLA-driven batchSize x maxBatchDelay x workers search through TorchServe.

``cli`` (the entry, ``main``), ``search`` (what to try and the pruned order), ``point``
(package, serve, load and measure one configuration) ``report`` (CSV, summary, apply) and ``plot``.
Callers outside the package use ``main``.
"""

from tsbatch.analysis.tune.cli import main

__all__ = ["main"]
