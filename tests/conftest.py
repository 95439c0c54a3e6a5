"""Shared test settings: tiny-model tests run on one torch thread (their ops are too small to split)."""

import torch

torch.set_num_threads(1)
