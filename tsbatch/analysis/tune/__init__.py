"""``make tune``: the SLA-driven batchSize x maxBatchDelay x workers search through TorchServe.

``cli`` (the entry, ``main``), ``search`` (what to try and the pruned order), ``point``
(package, serve, load and measure one configuration), ``report`` (CSV, summary, apply), ``plot``
and ``queue`` (the job queues against the throughput it measured, read by ``make check-config``).
Callers outside the package use ``cli.main`` and ``queue``; this file imports neither, so
reading the tuner's reports (``make check-config``, ``make serve``) does not import torch.
"""
