"""The HTTP client of TorchServe: token, load driver and arrivals, /metrics parsing, gRPC."""
