"""AttentionXML-style backbone (You et al., NeurIPS 2019) as the HRR paper's "LSTM" model
uses it (§5): word embeddings, a bidirectional LSTM, and one label-agnostic attention that
pools the sequence into a vector, followed by a fully-connected layer. The label-specific
attention and label tree of AttentionXML are replaced by the output head (dense or HRR)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from holoxmc.backbones.dropout import Dropout
from holoxmc.backbones.tokens import PAD, clip_tokens, copy_word_vectors_
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
        max_length: read at most this many leading tokens of each row (``None``: all).
        seed: seed of the weight initialisation (local generator).

    Shapes:
        forward: ``LongTensor (B, T)`` padded with 0 (on either side) → ``(B, fc_size)``;
        positions past the batch's longest row are not read.

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
        max_length: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if vocab_size < 2 or hidden_size < 1 or n_layers < 1 or fc_size < 1 or max_length is not None and max_length < 1:
            raise InputError(f"need vocab_size >= 2 and positive sizes; got {vocab_size}, {hidden_size}, {n_layers}, "
                             f"{fc_size}, max_length {max_length}")
        self.max_length = max_length
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

    def load_word_vectors(self, ids: Tensor, vectors: Tensor) -> None:
        """Initialise the embedding rows ``ids`` with pre-trained ``vectors`` ``(n, embed_dim)``."""
        copy_word_vectors_(self.embedding, ids, vectors)

    def forward(self, tokens: Tensor) -> Tensor:
        tokens = clip_tokens(tokens, self.max_length)
        length = tokens.shape[1]
        # A row runs to its last non-PAD token (left padding is read, and masked below); an
        # all-PAD row is read as one PAD token, so every row has a defined attention.
        positions = torch.arange(length, device=tokens.device)
        lengths = ((tokens != PAD) * (positions + 1)).amax(1).clamp_min(1)
        states = self.bidirectional_states(self.dropout(self.embedding(tokens)), lengths)
        logits = self.attention(states).squeeze(-1)  # (B, T)
        logits = logits.masked_fill(positions.unsqueeze(0) >= lengths.unsqueeze(1), float("-inf"))
        pooled = (F.softmax(logits, dim=1).unsqueeze(-1) * states).sum(1)
        return self.dropout(F.relu(self.fc(pooled)))

    def bidirectional_states(self, inputs: Tensor, lengths: Tensor) -> Tensor:
        """The BiLSTM's states ``(B, T, 2 * hidden_size)`` of the first ``lengths`` positions
        of each row of ``inputs`` ``(B, T, embed_dim)`` (later positions hold no meaning).

        What ``pack_padded_sequence`` computes, without packing: the forward direction reads
        the padded rows as they are (padding comes after a row's end), the reverse direction
        reads each row reversed within its length. Unpacked sequences take the fused LSTM
        kernels (oneDNN on a CPU, cuDNN on a GPU), several times faster than packed ones on a
        CPU (``benchmarks/text_step.py``); the weights are the ``nn.LSTM``'s own.
        """
        positions = torch.arange(inputs.shape[1], device=inputs.device).unsqueeze(0)
        last = (lengths.to(inputs.device) - 1).unsqueeze(1)
        reverse = torch.where(positions <= last, last - positions, positions)  # its own inverse
        states = inputs
        for layer in range(self.lstm.num_layers):
            forward = self._direction(states, layer, "")
            backward = self._direction(_gather_rows(states, reverse), layer, "_reverse")
            states = torch.cat([forward, _gather_rows(backward, reverse)], dim=2)
        return states

    def _direction(self, inputs: Tensor, layer: int, suffix: str) -> Tensor:
        """One direction of one layer of ``self.lstm`` over ``inputs`` ``(B, T, width)``, from zero states."""
        weights = [getattr(self.lstm, f"{name}_l{layer}{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih",
                                                                                "bias_hh")]
        zeros = inputs.new_zeros(1, inputs.shape[0], self.lstm.hidden_size)
        return torch.lstm(inputs, (zeros, zeros), weights, True, 1, 0.0, self.training, False, True)[0]


def _gather_rows(values: Tensor, index: Tensor) -> Tensor:
    """``values[b, index[b, t]]`` for ``values`` ``(B, T, C)`` and ``index`` ``(B, T)``."""
    return values.gather(1, index.unsqueeze(-1).expand(-1, -1, values.shape[2]))
