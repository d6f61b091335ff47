"""Backbones (sparse FC, XML-CNN, attention BiLSTM) and their composition with a head."""

from holoxmc.backbones.cnn import XMLCNNBackbone
from holoxmc.backbones.fc import FCBackbone
from holoxmc.backbones.lstm import AttentionLSTMBackbone
from holoxmc.backbones.network import Network, build_network

__all__ = ["FCBackbone", "XMLCNNBackbone", "AttentionLSTMBackbone", "Network", "build_network"]
