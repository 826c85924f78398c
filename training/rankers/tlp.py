"""A TLP-style ranker over schedule-primitive token sequences (after Zhai et al., ASPLOS 2023), in torch.

Input per candidate: a context token (kernel shape and source/target pair features) followed by one token
per trace instruction (an id and its numeric values), as `Featurizer.sequences` makes them. Each token is
embedded (id embedding + linear map of its numbers), passed through self-attention and residual MLP
blocks, decoded to one number per token, and the numbers of the real tokens are summed into the score.
Trained with a LambdaRank loss per target kernel (pairs weighted by their NDCG change), on the CPU.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import Ranker


def _torch():
    import torch
    torch.set_num_threads(2)
    return torch


def _build_net(n_ids: int, n_numeric: int, dim: int, heads: int, layers: int, blocks: int, dropout: float):
    torch = _torch()
    nn = torch.nn

    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
            self.norm = nn.LayerNorm(dim)

        def forward(self, x):
            return self.norm(x + self.body(x))

    class TLPNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(n_ids, dim, padding_idx=0)
            self.numeric = nn.Linear(n_numeric, dim)
            self.norm = nn.LayerNorm(dim)
            layer = nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout, batch_first=True)
            self.attention = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.blocks = nn.Sequential(*[Residual() for _ in range(blocks)])
            self.decode = nn.Linear(dim, 1)

        def forward(self, ids, nums):
            pad = ids == 0
            x = self.norm(self.embed(ids) + self.numeric(nums))
            x = self.attention(x, src_key_padding_mask=pad)
            x = self.blocks(x)
            per_token = self.decode(x).squeeze(-1).masked_fill(pad, 0.0)
            return per_token.sum(dim=1)

    return TLPNet()


def _trimmed(ids, nums):
    """A batch without its trailing padding columns (tokens are packed from position 0)."""
    n = int((ids > 0).sum(dim=1).max()) if len(ids) else 1
    return ids[:, :n], nums[:, :n]


def lambda_rank_loss(scores, rel):
    """LambdaRank loss of one group: pairwise logistic loss weighted by |delta NDCG| of swapping the pair."""
    torch = _torch()
    n = scores.shape[0]
    if n < 2:
        return scores.sum() * 0.0
    order = torch.argsort(scores.detach(), descending=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(n)
    discount = 1.0 / torch.log2(rank.float() + 2.0)
    gain = rel
    ideal = torch.sort(rel, descending=True).values
    idcg = (ideal / torch.log2(torch.arange(n, dtype=torch.float32) + 2.0)).sum().clamp_min(1e-9)
    diff = rel[:, None] - rel[None, :]
    delta = (gain[:, None] - gain[None, :]).abs() * (discount[:, None] - discount[None, :]).abs() / idcg
    s = scores[:, None] - scores[None, :]
    pairs = (diff > 0).float()
    loss = (torch.nn.functional.softplus(-s) * delta * pairs).sum()
    return loss / pairs.sum().clamp_min(1.0)


class TLPRanker(Ranker):
    name = "tlp"
    feature_set = "tokens"

    def __init__(self, dim: int = 64, heads: int = 4, layers: int = 1, blocks: int = 2, dropout: float = 0.1,
                 epochs: int = 20, learning_rate: float = 1e-3, groups_per_batch: int = 8,
                 weight_decay: float = 1e-4, seed: int = 0) -> None:
        self.dim = dim
        self.heads = heads
        self.layers = layers
        self.blocks = blocks
        self.dropout = dropout
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.groups_per_batch = groups_per_batch
        self.weight_decay = weight_decay
        self.seed = seed

    # inputs: X[:, :, 0] token ids (0 = pad; the context token has the largest id), X[:, :, 1:] numbers
    def _split(self, X: np.ndarray):
        torch = _torch()
        real = np.nonzero((X[:, :, 0] > 0).any(axis=0))[0]
        X = X[:, :real[-1] + 1] if len(real) else X  # drop the padding columns no candidate uses
        ids = torch.from_numpy(np.rint(X[:, :, 0]).astype(np.int64))
        nums = (X[:, :, 1:] - self.mean_[:, :X.shape[1]]) / self.std_[:, :X.shape[1]]
        nums[X[:, :, 0] == 0] = 0.0
        return ids, torch.from_numpy(nums.astype(np.float32))

    def _fit(self, X: np.ndarray, y: np.ndarray, group: np.ndarray) -> None:
        torch = _torch()
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        # standardize numbers per position kind: the context token and the instruction tokens differ
        mean = np.zeros((2, X.shape[2] - 1), dtype=np.float32)
        std = np.ones((2, X.shape[2] - 1), dtype=np.float32)
        ctx, tok = X[:, 0, 1:], X[:, 1:, 1:][X[:, 1:, 0] > 0]
        for j, part in enumerate((ctx, tok)):
            if len(part):
                mean[j], std[j] = part.mean(axis=0), part.std(axis=0) + 1e-3
        self.mean_ = np.concatenate([mean[:1], np.repeat(mean[1:], X.shape[1] - 1, axis=0)])[None]
        self.std_ = np.concatenate([std[:1], np.repeat(std[1:], X.shape[1] - 1, axis=0)])[None]
        self.n_ids_ = int(X[:, 0, 0].max()) + 1
        ids, nums = self._split(X)
        self.net_ = _build_net(self.n_ids_, X.shape[2] - 1, self.dim, self.heads, self.layers, self.blocks,
                               self.dropout)
        opt = torch.optim.AdamW(self.net_.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay)
        starts = np.concatenate([[0], np.cumsum(group)[:-1]])
        rel = torch.from_numpy(y.astype(np.float32))
        self.net_.train()
        for _ in range(self.epochs):
            order = rng.permutation(len(group))
            for b in range(0, len(order), self.groups_per_batch):
                chosen = order[b:b + self.groups_per_batch]
                index = np.concatenate([np.arange(starts[g], starts[g] + group[g]) for g in chosen])
                scores = self.net_(*_trimmed(ids[index], nums[index]))
                loss, at = 0.0, 0
                for g in chosen:
                    n = int(group[g])
                    loss = loss + lambda_rank_loss(scores[at:at + n], rel[index[at:at + n]])
                    at += n
                opt.zero_grad()
                (loss / len(chosen)).backward()
                opt.step()
        self.net_.eval()

    def _predict(self, X: np.ndarray, group) -> np.ndarray:
        torch = _torch()
        ids, nums = self._split(X)
        ids = ids.clamp_max(self.n_ids_ - 1)
        out = []
        with torch.no_grad():
            for b in range(0, len(ids), 512):
                out.append(self.net_(*_trimmed(ids[b:b + 512], nums[b:b + 512])).numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def _save_model(self, folder: Path) -> None:
        torch = _torch()
        torch.save({"state": self.net_.state_dict(), "mean": self.mean_, "std": self.std_, "n_ids": self.n_ids_,
                    "n_numeric": self.mean_.shape[-1]}, folder / "model.pt")

    def _load_model(self, folder: Path) -> None:
        torch = _torch()
        path = folder / "model.pt"
        if not path.exists():
            raise ValueError(f"missing {path}")
        saved = torch.load(path, weights_only=False)
        self.mean_, self.std_, self.n_ids_ = saved["mean"], saved["std"], saved["n_ids"]
        self.net_ = _build_net(self.n_ids_, saved["n_numeric"], self.dim, self.heads, self.layers, self.blocks,
                               self.dropout)
        self.net_.load_state_dict(saved["state"])
        self.net_.eval()
