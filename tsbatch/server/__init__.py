"""Running TorchServe: instances on free ports (for `make serve`, benches and tests), what they
serve, and `tsbatch apply`."""
