"""DistilBERT's forward pass over the real tokens only (FORWARD=packed).

A padded batch computes every layer for size x longest tokens. On sentences this short almost
all of a layer's work is its linear maps (projections and feed-forward), and those never mix
tokens: so the whole batch's real tokens go through them as one matrix, and only attention,
the one step that mixes the tokens of a sentence, sees the padded layout (a scatter before it,
a gather after). The last layer computes only the [CLS] row the classifier reads; its keys and
values still come from every token. The arithmetic is the padded pass's, op for op on the real
rows (`tests/unit/test_models.py` compares the two); what is saved is the padding's share of
the linear maps and five sixths of the last layer.

Measured against the padded pass on the benchmark's sentences (`docs/benchmarks/packed-ab.md`).

In bf16 and fp16 on a CPU, oneDNN generates a linear map's kernel for each number of rows it
meets, and a batch's real tokens are a new number almost every time: so there the rows go in
groups of `row_multiple` (16), the extra rows token 0 at no sentence's place (nothing attends
to them, nothing reads them back), and the few row counts that remain are the ones the
warm-up has run (`docs/benchmarks/row-buckets-ab.md`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.nn import functional

from batcher.model import packed_work


def supports(model: Any) -> bool:
    """A DistilBERT sequence classifier, whose layers this pass reads by name."""
    return getattr(model.config, "model_type", "") == "distilbert" and hasattr(model, "distilbert")


class PackedForward:
    def __init__(self, model: Any, row_multiple: int = 1) -> None:
        self.model = model  # DistilBertForSequenceClassification, read by its layers' names
        config = model.config
        self.dim, self.hidden, self.heads = int(config.dim), int(config.hidden_dim), int(config.n_heads)
        self.row_multiple = row_multiple  # the linear maps' row count is rounded up to this

    def __call__(self, ids: Sequence[Sequence[int]]) -> torch.Tensor:
        """Logits for each sequence of token ids (no padding given or needed)."""
        model = self.model
        device = model.classifier.weight.device
        lengths = torch.tensor([len(s) for s in ids])
        size, longest = len(ids), int(lengths.max())
        tokens = int(lengths.sum())
        extra = -tokens % self.row_multiple  # rows that only round the count up
        flat = torch.tensor([t for s in ids for t in s] + [0] * extra, device=device)
        positions = torch.cat([torch.arange(n) for n in [*lengths.tolist(), extra]]).to(device)
        real = torch.arange(longest)[None, :] < lengths[:, None]  # (size, longest)
        rows = real.flatten().nonzero().squeeze(1)  # each real token's place in the padded layout
        spare = size * longest  # where the extra rows are scattered to: one place past the layout
        scatter_to = torch.cat([rows, torch.full((extra,), spare)]).to(device)
        gather_from = torch.cat([rows, torch.zeros(extra, dtype=rows.dtype)]).to(device)  # extra: any
        first = (torch.cumsum(lengths, 0) - lengths).to(device)  # each [CLS] among the real
        attend = real.to(device)[:, None, None, :]

        def heads(t: torch.Tensor, rows_each: int) -> torch.Tensor:  # (size, heads, rows, d/heads)
            return t.view(size, rows_each, self.heads, -1).transpose(1, 2)

        def padded(t: torch.Tensor) -> torch.Tensor:
            out = t.new_zeros(spare + 1, self.dim)
            out[scatter_to] = t
            return heads(out[:spare], longest)

        embeddings = model.distilbert.embeddings
        x = embeddings.LayerNorm(embeddings.word_embeddings(flat) + embeddings.position_embeddings(positions))
        layers = model.distilbert.transformer.layer
        for number, layer in enumerate(layers):
            attention = layer.attention
            keys, values = padded(attention.k_lin(x)), padded(attention.v_lin(x))
            last = number == len(layers) - 1
            if last:
                x = x[first]  # only [CLS] goes on to the classifier
            queries = heads(attention.q_lin(x), 1) if last else padded(attention.q_lin(x))
            mixed = functional.scaled_dot_product_attention(
                queries, keys, values, attn_mask=attend, scale=attention.scaling
            )
            mixed = mixed.transpose(1, 2).reshape(-1, self.dim)
            x = layer.sa_layer_norm(attention.out_lin(mixed if last else mixed[gather_from]) + x)
            ffn = layer.ffn
            x = layer.output_layer_norm(ffn.lin2(ffn.activation(ffn.lin1(x))) + x)
        logits: torch.Tensor = model.classifier(torch.relu(model.pre_classifier(x)))
        return logits

    def work(self, size: int, longest: int, real: int) -> float:
        return packed_work(size, longest, real, self.dim, self.hidden)
