"""The one left-pad packer (gigpo.rollout.padding.left_pad) against a plain per-row loop."""

import random

import torch

from gigpo.rollout.padding import left_pad
from gigpo.train.update.logprobs import pack_right_aligned


def test_left_pad_equals_a_plain_loop():
    rng = random.Random(0)
    for _ in range(300):
        seqs = [[rng.randint(0, 50) for _ in range(rng.randint(0, 7))] for _ in range(rng.randint(1, 5))]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), 9, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):
            ids[r, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[r, width - len(s):] = 1
        got_ids, got_mask = left_pad(seqs, 9)
        assert torch.equal(got_ids, ids) and torch.equal(got_mask, mask)


def test_pack_right_aligned_response_mask():
    ids, attn, resp, L = pack_right_aligned([[1, 2], [3]], [[4], [5, 6, 7]], pad_id=0)
    assert ids.tolist() == [[0, 1, 2, 4], [3, 5, 6, 7]] and attn.tolist() == [[0, 1, 1, 1], [1, 1, 1, 1]]
    assert L == 3 and resp.tolist() == [[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]
