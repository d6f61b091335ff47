"""AttentionXML-style backbone (You et al., NeurIPS 2019) as the HRR paper's "LSTM" model
uses it (§5): word embeddings, a bidirectional LSTM, and one label-agnostic attention that
pools the sequence into a vector, followed by a fully-connected layer. The label-specific
attention and label tree of AttentionXML are replaced by the output head (dense or HRR)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from holoxmc.backbones.cnn import PAD
from holoxmc.backbones.dropout import Dropout
from holoxmc.codes.hrr import Stream, local_generator
from holoxmc.errors import InputError
from holoxmc.heads.dense import reset_linear_

__all__ = ["AttentionLSTMBackbone"]


class AttentionLSTMBackbone(nn.Module):
    """Token ids → BiLSTM → attention pooling (PAD positions masked) → ReLU layer.

    Args:
        vocab_size: number of token ids, PAD (= 0) included.
        embed_dim: word-embedding width.
        hidden_size: LSTM state width per direction.
        n_layers: stacked LSTM layers.
        fc_size: width of the final fully-connected layer and of the output.
        dropout: dropout on the embeddings and after the final layer.
        seed: seed of the weight initialisation (local generator).

    Shapes:
        forward: ``LongTensor (B, T)`` padded with 0 (on either side) → ``(B, fc_size)``.

    Example:
        >>> net = AttentionLSTMBackbone(100, embed_dim=8, hidden_size=6, fc_size=5)
        >>> net(torch.tensor([[4, 7, 0, 0], [0, 0, 0, 0]])).shape
        torch.Size([2, 5])
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        embed_dim: int = 300,
        hidden_size: int = 256,
        n_layers: int = 1,
        fc_size: int = 256,
        dropout: float = 0.5,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if vocab_size < 2 or hidden_size < 1 or n_layers < 1 or fc_size < 1:
            raise InputError(
                f"need vocab_size >= 2 and positive sizes; got {vocab_size}, {hidden_size}, {n_layers}, {fc_size}"
            )
        self.out_features = int(fc_size)
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.lstm = nn.LSTM(embed_dim, hidden_size, n_layers, batch_first=True, bidirectional=True)
        self.attention = nn.Linear(2 * hidden_size, 1, bias=False)
        self.fc = nn.Linear(2 * hidden_size, self.out_features)
        self.dropout = Dropout(dropout)
        self.reset_parameters(local_generator(seed, Stream.LSTM_INIT))

    def reset_parameters(self, generator: torch.Generator) -> None:
        """Embeddings from N(0, 1) (PAD row zero); LSTM weights from U(±1/√hidden_size)
        (PyTorch's default); linear layers from U(±1/√fan_in)."""
        bound = self.lstm.hidden_size**-0.5
        with torch.no_grad():
            nn.init.normal_(self.embedding.weight, generator=generator)
            self.embedding.weight[PAD].zero_()
            for weight in self.lstm.parameters():
                nn.init.uniform_(weight, -bound, bound, generator=generator)
        reset_linear_(self.attention, generator)
        reset_linear_(self.fc, generator)

    def forward(self, tokens: Tensor) -> Tensor:
        length = tokens.shape[1]
        # A row runs to its last non-PAD token (left padding is read, and masked below); an
        # all-PAD row is read as one PAD token, so every row has a defined attention.
        positions_1 = torch.arange(1, length + 1, device=tokens.device)
        lengths = ((tokens != PAD) * positions_1).amax(1).clamp_min(1)
        packed = pack_padded_sequence(
            self.dropout(self.embedding(tokens)), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        states, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=length)
        logits = self.attention(states).squeeze(-1)  # (B, T)
        positions = torch.arange(length, device=tokens.device)
        logits = logits.masked_fill(positions.unsqueeze(0) >= lengths.unsqueeze(1), float("-inf"))
        pooled = (F.softmax(logits, dim=1).unsqueeze(-1) * states).sum(1)
        return self.dropout(F.relu(self.fc(pooled)))
