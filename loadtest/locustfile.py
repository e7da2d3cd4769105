"""``locust -f loadtest/locustfile.py``: the toolkit's users and load shape for a plain Locust run.

The code lives in ``tsbatch.locust.locustfile`` (installed with the package, which
``tsbatch loadtest`` runs); docs/loadtest.md has the options.
"""

from tsbatch.locust.locustfile import MultiInputUser, SlaShape, TorchServeUser

__all__ = ["MultiInputUser", "SlaShape", "TorchServeUser"]
