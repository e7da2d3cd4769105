"""Benchmarks that print figures side by side with their baseline in the same run."""
