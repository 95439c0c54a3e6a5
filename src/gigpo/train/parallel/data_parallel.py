"""The learner's data-parallel engine: PyTorch DDP or FSDP2 (``fully_shard``) around the policy, as the trainer
needs it — a module to train through, per-micro-batch gradient sync, zero-weight padding steps, full weights
for the no-grad passes (rollout, old/reference log-probs, evaluation) and for checkpoints.

``train.parallel=none`` (one process) makes every method the plain single-process operation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from gigpo.train.parallel.distributed import DistContext


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks FSDP shards one by one: modules whose class name ends in ``DecoderLayer`` (the
    Hugging Face convention: LlamaDecoderLayer, Qwen2DecoderLayer, ...)."""
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]


class DataParallel:
    """Wraps ``model`` (and the frozen ``ref_model``) for ``ctx.parallel``.

    * ddp: ``DistributedDataParallel(model)``; the raw model (same parameters) serves the no-grad passes;
      the reference model is replicated (it has no gradients to sync).
    * fsdp: ``fully_shard`` on every decoder layer, then on the root, for the policy and the reference model;
      mixed precision (params in the model's dtype, gradients reduced in float32) on GPUs. The no-grad passes
      run inside :meth:`full_weights`, which all-gathers every layer once, so ranks that generate different
      numbers of tokens never issue unpaired collectives.
    * the value head (one linear layer, PPO) stays replicated; its gradient is averaged by
      :meth:`finish_gradients`.
    """

    def __init__(self, ctx: DistContext, model: torch.nn.Module, device: torch.device):
        """Wrap the policy now, before the optimiser collects its parameters (FSDP replaces them by shards)."""
        self.ctx, self.model, self.device = ctx, model, device
        self.ref_model: torch.nn.Module | None = None
        self.value_head: torch.nn.Module | None = None
        self.mode = ctx.parallel
        self.train_model: torch.nn.Module = model
        if self.mode == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            ids = [device.index] if device.type == "cuda" else None
            self.train_model = DistributedDataParallel(model, device_ids=ids)
        elif self.mode == "fsdp":
            self._shard(model, device)

    def add_reference(self, ref_model: torch.nn.Module | None, value_head: torch.nn.Module | None) -> None:
        """The frozen reference model (sharded like the policy under FSDP, replicated under DDP) and the value
        head (replicated; :meth:`finish_gradients` averages its gradient)."""
        self.ref_model, self.value_head = ref_model, value_head
        if self.mode == "fsdp" and ref_model is not None:
            self._shard(ref_model, self.device)

    @staticmethod
    def _shard(model: torch.nn.Module, device: torch.device) -> None:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        layers = decoder_layers(model)
        if not layers:
            raise ValueError(f"train.parallel=fsdp: {type(model).__name__} has no *DecoderLayer modules to shard; "
                             "use train.parallel=ddp")
        dtype = next(model.parameters()).dtype
        kw: dict[str, Any] = {}
        if device.type == "cuda":
            kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
        for layer in layers:
            fully_shard(layer, **kw)
        fully_shard(model, **kw)

    def _fsdp_modules(self, model: torch.nn.Module | None) -> list[Any]:
        from torch.distributed.fsdp import FSDPModule

        return [m for m in model.modules() if isinstance(m, FSDPModule)] if model is not None else []

    @contextmanager
    def full_weights(self) -> Iterator[None]:
        """FSDP: every layer of the policy and reference model all-gathered for the duration (no collective
        inside, so ranks may run different numbers of forwards), resharded after. Otherwise nothing."""
        if self.mode != "fsdp":
            yield
            return
        mods = self._fsdp_modules(self.model) + self._fsdp_modules(self.ref_model)
        for m in mods:
            m.set_reshard_after_forward(False, recurse=False)
            m.unshard()
        try:
            yield
        finally:
            for m in mods:
                m.reshard()
                m.set_reshard_after_forward(True, recurse=False)

    def global_counts(self, tokens: int, rows: int, micro: int) -> tuple[float, float, int]:
        """A mini-batch's ``(response tokens, rows)`` summed over ranks and its micro-batch count maximised
        over ranks (every rank pads to it). One process: the arguments."""
        if not self.ctx.active:
            return float(tokens), float(rows), micro
        t, r = self.ctx.all_sum([tokens, rows])
        return t, r, int(self.ctx.all_max(micro))

    def set_sync(self, last: bool) -> None:
        """Before a micro-batch's forward: reduce gradients across ranks on its backward only when it is the
        mini-batch's last (DDP's ``no_sync`` flag, FSDP2's ``set_requires_gradient_sync``)."""
        if self.mode == "ddp":
            self.train_model.require_backward_grad_sync = last
        elif self.mode == "fsdp":
            self.model.set_requires_gradient_sync(last)

    def padding_step(self, pad_id: int, device: torch.device) -> None:
        """A forward/backward of weight 0 (one pad token): a rank with fewer micro-batches than another runs
        these so every rank issues the same collectives. Adds exactly zero to every gradient."""
        ids = torch.full((1, 2), int(pad_id), dtype=torch.long, device=device)
        out = self.train_model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
        (out.logits.float().sum() * 0.0).backward()

    def finish_gradients(self) -> None:
        """After the last micro-batch: average the replicated value head's gradient over the ranks."""
        if self.value_head is not None and self.ctx.active:
            self.ctx.all_reduce_grads(list(self.value_head.parameters()))

    @staticmethod
    def clip_grad_norm(params: list[torch.nn.Parameter], max_norm: float) -> float:
        """``clip_grad_norm_`` over the (synced, or FSDP-sharded) gradients; the global norm as a float."""
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        if hasattr(norm, "full_tensor"):  # a DTensor under FSDP: the norm over all shards
            norm = norm.full_tensor()
        return float(norm)

    def model_state_dict(self) -> dict | None:
        """FSDP: the consolidated state dict (gathered over ranks, on rank 0's CPU; empty elsewhere) — every rank
        must call it. Otherwise None: the model's own parameters are whole."""
        if self.mode != "fsdp":
            return None
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        # tied parameters (embeddings = lm_head) come back as separate copies, which save_pretrained cannot
        # recognise as tied: keep the first name of each, as a single-process checkpoint has
        seen: set[int] = set()
        for name, p in self.model.named_parameters(remove_duplicate=False):
            if id(p) in seen:
                full.pop(name, None)
            seen.add(id(p))
        return full

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict:
        """What the checkpoint stores as ``optimizer.pt``. DDP: the optimiser is replicated, rank 0's state is
        everyone's (the single-process format). FSDP: consolidated on rank 0 keyed by parameter names
        (``torch.distributed.checkpoint.state_dict``), every rank must call it."""
        if self.mode != "fsdp":
            return optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(self.model, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def load_optimizer_state_dict(self, optimizer: torch.optim.Optimizer, state: dict) -> None:
        if self.mode != "fsdp":
            optimizer.load_state_dict(state)
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(self.model, optimizer, state, options=StateDictOptions(full_state_dict=True))
