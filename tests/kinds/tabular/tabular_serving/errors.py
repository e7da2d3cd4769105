"""The tabular kind's own request error (its code names what was wrong; batchkit maps the status)."""

from __future__ import annotations

from batchkit.errors import InvalidInput


class InvalidFeatures(InvalidInput):
    """A row that is not ``num_features`` finite numbers."""

    code = "invalid_features"
