"""Running TorchServe: `make serve`/`stop`/`status`, and private servers for benches and tests."""
