"""The ResNet image classifier: weights (user, torchvision or trained on digits) -> TorchScript."""
