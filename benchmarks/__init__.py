"""Reference handlers that benchmarks compare the toolkit's handlers against."""
