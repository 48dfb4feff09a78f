"""Small modules and factories for the PyTorch frontend tests (imported by path or as a module)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SmallCNN(nn.Module):
    """conv(3->8, 3x3, pad 1) -> BN -> ReLU -> maxpool 2 -> conv(8->16, 3x3, pad 1) -> ReLU -> GAP -> fc(16->10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(self.gap(x), 1))


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        raise ValueError("forward is broken on purpose")


class ReadsValues(nn.Module):
    """Data-dependent control flow on a value: traced with an assumed value (``value_0``)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return x


def make_cnn():
    return SmallCNN()


def make_cnn_with_inputs():
    return SmallCNN(), [(2, 3, 16, 16)]


def make_raises():
    return Raises()


def not_a_module():
    return 42
