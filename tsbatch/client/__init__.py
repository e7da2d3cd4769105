"""The one TorchServe client: process lifecycle and ports, token, load driver, /metrics parsing."""
