"""The CPU-sized training config the checkpoint and run-directory fault tests share (a tiny model, 2 × 2
trajectories of at most 4 steps, no evaluation): a whole run takes seconds."""

SMALL = [
    "model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}",
    "env.size=3", "env.max_steps=4", "rollout.groups=2", "rollout.group_size=2",
    "optim.micro_batch_size=8", "optim.mini_batches=1", "optim.ppo_epochs=1",
    "train.eval_episodes=0", "train.progress=false", "train.sample_trajectories=0",
]
