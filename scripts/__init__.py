"""Command-line entry points (``python -m scripts.<name>``); the code lives in ``tsbatch``."""
