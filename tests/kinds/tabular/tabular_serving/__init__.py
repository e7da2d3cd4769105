"""The tabular kind's worker side: its handler, config, errors and body decoding. It travels
inside every archive beside ``batchkit`` (``Kind.handler_modules``) and imports nothing of
the toolkit."""
