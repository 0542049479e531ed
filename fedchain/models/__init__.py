"""Models trained by FedChain's clients: LeNet-5, a small CNN, ResNet-18 (CIFAR variant)."""

from fedchain.models.cnn import SmallCNN
from fedchain.models.lenet import LeNet5
from fedchain.models.registry import MODELS, ModelSpec, build_model
from fedchain.models.resnet import resnet18

__all__ = ["MODELS", "LeNet5", "ModelSpec", "SmallCNN", "build_model", "resnet18"]
