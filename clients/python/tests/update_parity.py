"""The reference learner's update against t1's TypeScript learner on the same batch (issue: bring
your own trainer). Reads DIR/weights.safetensors (the starting weights), DIR/spec.binpb (a
t1.v1.JobSpec: the learner settings) and DIR/batch.binpb (a t1.v1.Batch, as TakeBatch serves it),
takes UPDATES consecutive updates on that batch as learner.py takes them (rows, loss weights,
optimisers, minibatch order, PPO actor-critic loss, clipping, AdamW), and writes
DIR/torch-stats.json (one statistics object per update) and DIR/torch-weights.safetensors.

    python3 clients/python/tests/update_parity.py DIR UPDATES
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from t1_trainer.contract import message  # noqa: E402
from t1_trainer.learner import loss_weights, optimisers_for, settings, update  # noqa: E402
from t1_trainer.ppo import trajectory_rows  # noqa: E402
from t1_trainer.tinymoe import TinyMoE  # noqa: E402


def main(folder, updates):
    torch.set_num_threads(1)
    read = lambda name: open(os.path.join(folder, name), "rb").read()  # noqa: E731
    model, _ = TinyMoE.from_bytes(read("weights.safetensors"))
    spec = message("t1.v1.JobSpec").FromString(read("spec.binpb"))
    batch = message("t1.v1.Batch").FromString(read("batch.binpb"))
    cfg = settings(spec)
    optimisers = optimisers_for(model, cfg)
    out = []
    for step in range(updates):
        vocab = model.vocab_size
        rows = [(trajectory_rows(t, vocab), w) for t, w in zip(batch.trajectories, loss_weights(batch))]
        rows = [dict(r, weight=w) for r, w in rows if r is not None]
        phase = "critic_warmup" if step < cfg["warmup"] else "ppo"
        out.append(dict(update(model, optimisers, rows, cfg, phase, step), rows=len(rows)))
    with open(os.path.join(folder, "torch-stats.json"), "w") as f:
        json.dump(out, f)
    with open(os.path.join(folder, "torch-weights.safetensors"), "wb") as f:
        f.write(model.to_bytes(updates))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
