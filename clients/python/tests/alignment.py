"""Cross-framework alignment (issue: bring your own trainer): the PyTorch learner's log-probs of
the tokens a TypeScript sampler generated, with the sampler's routing replayed (R3) and with the
learner's own routing, against the sampler's behaviour log-probs.

Reads DIR/weights.safetensors (the learner's weights) and DIR/sequences.json (a list of {ids,
mask, logprobs, routing, temperature}: routing rows [len(ids) − 1, layers, top_k] flattened),
writes DIR/alignment.json: mean over sequences of the mean over generated tokens of
|log p_learner − log p_sampler|, with and without replay, and the routing choices that differ.

    python3 clients/python/tests/alignment.py DIR
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from t1_trainer.tinymoe import TinyMoE  # noqa: E402


def main(folder):
    with open(os.path.join(folder, "weights.safetensors"), "rb") as f:
        model, _ = TinyMoE.from_bytes(f.read())
    with open(os.path.join(folder, "sequences.json")) as f:
        sequences = json.load(f)
    c = model.config
    out = {"replay": [], "no_replay": [], "routing_differs": 0, "routing_choices": 0}
    with torch.no_grad():
        for s in sequences:
            ids = torch.tensor(s["ids"], dtype=torch.long)
            n = ids.numel()
            replay = torch.tensor(s["routing"], dtype=torch.long).reshape(n - 1, c["nLayers"], c["topK"])
            targets = ids[1:]
            action = torch.tensor(s["mask"][1:], dtype=torch.bool)
            behaviour = torch.tensor(s["logprobs"][1:], dtype=torch.float64)
            for key, r in (("replay", replay), ("no_replay", None)):
                logits, _, used, _ = model(ids[:-1], replay=r)
                logp = torch.log_softmax(logits.double() / s["temperature"], dim=-1)
                logp = logp.gather(-1, targets[:, None])[:, 0]
                out[key].append(float((logp - behaviour)[action].abs().mean()))
                if r is None:
                    out["routing_differs"] += int((used.sort(-1).values != replay.sort(-1).values).any(-1).sum())
                    out["routing_choices"] += int(used.shape[0] * used.shape[1])
    result = {
        "replay": sum(out["replay"]) / len(out["replay"]),
        "no_replay": sum(out["no_replay"]) / len(out["no_replay"]),
        "routing_differs": out["routing_differs"],
        "routing_choices": out["routing_choices"],
    }
    with open(os.path.join(folder, "alignment.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
