"""Batch analysis: the in-process sweep, the SLA-driven tuner, their selection rules and plots."""
