"""Data parallelism under torchrun: the process group (DDP/FSDP2 on gloo or NCCL) and the per-step bookkeeping the
trainer hides behind one call."""
