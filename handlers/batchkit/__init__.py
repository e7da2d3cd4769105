"""Shared batch core for the toolkit's TorchServe handlers.

Everything here is plain Python: the handlers in ``handlers/`` are thin adapters that
plug these functions into TorchServe's ``initialize``/``handle`` contract.
"""
