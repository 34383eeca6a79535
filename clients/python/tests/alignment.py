"""Cross-framework alignment (issue: bring your own trainer): the PyTorch learner's log-probs of
the tokens a TypeScript sampler generated, with the sampler's routing replayed (R3) and with the
learner's own routing, against the sampler's behaviour log-probs.

Reads the model from DIR/weights.safetensors (t1's weights file) or, given CHECKPOINT, from that
Hugging Face checkpoint directory by tensor name only (config.json, index and shards; no t1
metadata), and DIR/sequences.json (a list of {ids, mask, logprobs, routing, temperature}:
routing rows [len(ids) − 1, layers, top_k] flattened); writes DIR/alignment.json: mean over
sequences of the mean over generated tokens of |log p_learner − log p_sampler|, with and without
replay, the routing choices that differ, and the tokens compared.

    python3 clients/python/tests/alignment.py DIR [CHECKPOINT]
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from t1_trainer import hf_checkpoint  # noqa: E402
from t1_trainer.tinymoe import TinyMoE  # noqa: E402


def main(folder, checkpoint=None):
    torch.set_num_threads(1)
    if checkpoint is None:
        with open(os.path.join(folder, "weights.safetensors"), "rb") as f:
            model, _ = TinyMoE.from_bytes(f.read())
    else:
        model = hf_checkpoint.load(checkpoint, critic=False)
    with open(os.path.join(folder, "sequences.json")) as f:
        sequences = json.load(f)
    k = model.config["num_experts_per_tok"]
    out = {"replay": [], "no_replay": [], "routing_differs": 0, "routing_choices": 0, "tokens": 0}
    with torch.no_grad():
        for s in sequences:
            ids = torch.tensor(s["ids"], dtype=torch.long)
            n = ids.numel()
            # The sampler's table: one row per layer (a dense layer's unused).
            replay = model.routed_rows(torch.tensor(s["routing"], dtype=torch.long).reshape(n - 1, -1, k))
            action = torch.tensor(s["mask"][1:], dtype=torch.bool)
            behaviour = torch.tensor(s["logprobs"][1:], dtype=torch.float64)
            out["tokens"] += int(action.sum())
            for key, r in (("replay", replay), ("no_replay", None)):
                logp, _, used = model.token_logprobs(ids, replay=r, temperature=s["temperature"])
                out[key].append(float((logp - behaviour)[action].abs().mean()))
                if r is None:
                    out["routing_differs"] += int((used.sort(-1).values != replay.sort(-1).values).any(-1).sum())
                    out["routing_choices"] += int(used.shape[0] * used.shape[1])
    result = {
        "replay": sum(out["replay"]) / len(out["replay"]),
        "no_replay": sum(out["no_replay"]) / len(out["no_replay"]),
        "replay_max_episode": max(out["replay"]),
        "routing_differs": out["routing_differs"],
        "routing_choices": out["routing_choices"],
        "tokens": out["tokens"],
        "episodes": len(sequences),
    }
    with open(os.path.join(folder, "alignment.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
