"""Building blocks of the reference networks that PyTorch has no single module for.

Each is one layer *kind* for THOR (see ``thor_sdk.layers.kinds``): the layer list treats it as a
leaf, probes build it alone, and the exporters trace it like any other module.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F


class TokenPositionalEmbedding(nn.Module):
    """Token embedding plus a learned positional embedding: ``(B, T) int64 -> (B, T, dim)``."""

    def __init__(self, num_embeddings, embedding_dim, seq_len):
        super().__init__()
        self.tok = nn.Embedding(num_embeddings, embedding_dim)
        self.pos = nn.Parameter(torch.zeros(seq_len, embedding_dim))
        nn.init.normal_(self.pos, std=0.02)
        self.seq_len = seq_len

    def forward(self, idx):
        return self.tok(idx) + self.pos


class LSTMSequence(nn.Module):
    """``nn.LSTM`` (batch first) returning only the output sequence ``(B, T, hidden)``."""

    def __init__(self, input_size, hidden_size, num_layers=1):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out


class GRUSequence(nn.Module):
    """``nn.GRU`` (batch first) returning only the output sequence ``(B, T, hidden)``."""

    def __init__(self, input_size, hidden_size, num_layers=1):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers=num_layers, batch_first=True)

    def forward(self, x):
        out, _ = self.gru(x)
        return out


class LSTMCellLoop(nn.Module):
    """``nn.LSTMCell`` called once per time step of a ``(B, steps, input_size)`` input, as a Python loop over time
    calls it, from a zero state, returning the last hidden state (kind ``lstm_cell``'s probe). The steps are read
    by ``unbind`` (one backward op for all of them; ``x[:, t]`` would zero-fill the whole input's gradient at every
    step)."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def forward(self, x):
        h = x.new_zeros(x.size(0), self.cell.hidden_size)
        state = (h, h)
        for x_t in x.unbind(1):
            state = self.cell(x_t, state)
        return state[0]


class GRUCellLoop(nn.Module):
    """``nn.GRUCell`` called once per time step, as ``LSTMCellLoop`` (kind ``gru_cell``'s probe)."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = nn.GRUCell(input_size, hidden_size)

    def forward(self, x):
        h = x.new_zeros(x.size(0), self.cell.hidden_size)
        for x_t in x.unbind(1):
            h = self.cell(x_t, h)
        return h


class TransformerBlock(nn.Module):
    """Pre-LayerNorm transformer encoder block with causal self-attention.

    ``head_dim`` is independent of ``d_model`` (as in T5), so 6 heads work with d_model=256.
    Attention is written with plain matmul/softmax so that every exporter can trace its backward.
    """

    def __init__(self, d_model, n_heads, head_dim, d_ff, dropout=0.1):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, head_dim
        inner = n_heads * head_dim
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * inner)
        self.proj = nn.Linear(inner, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(self.n_heads * self.head_dim, dim=-1)
        q = q.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.ff2(F.gelu(self.ff1(self.ln2(x)))))
