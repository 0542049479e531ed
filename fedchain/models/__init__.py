"""Models trained by FedChain's clients: LeNet-5, a small CNN, ResNet-18."""
