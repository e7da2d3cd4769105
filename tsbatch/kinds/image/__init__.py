"""The image classifier (any torchvision architecture): weights (user, torchvision or digits-trained) -> TorchScript."""
