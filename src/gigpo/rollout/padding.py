"""The one left-pad packer: token sequences right-aligned in a (B, W) batch, as generation and the learner's
log-prob passes both need (a row's last token in the last column, so new tokens append at the same position)."""

from __future__ import annotations

import torch


def left_pad(seqs: list[list[int]], pad_id: int, min_width: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both ``(B, W)`` int64 with W the longest sequence (at least ``min_width``):
    row r holds ``seqs[r]`` in its last ``len(seqs[r])`` columns (mask 1) and ``pad_id`` before it (mask 0). One
    scatter, no loop over rows."""
    lens = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    width = max(int(lens.max()) if len(seqs) else 0, min_width)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    total = int(lens.sum())
    if total:
        flat = torch.tensor([t for s in seqs for t in s], dtype=torch.long)
        rows = torch.repeat_interleave(torch.arange(len(seqs)), lens)
        first = torch.repeat_interleave(torch.cumsum(lens, 0) - lens, lens)  # flat index of each row's first token
        cols = torch.arange(total) - first + torch.repeat_interleave(width - lens, lens)
        ids[rows, cols] = flat
        mask[rows, cols] = 1
    return ids, mask
