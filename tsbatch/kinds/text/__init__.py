"""The intent classifier: data splits, training on the MiniLM encoder, report, TorchScript export."""
