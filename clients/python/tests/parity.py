"""Scores a sequence with the PyTorch TinyMoE as test/integration/torch-tinymoe.test.ts asks:
reads DIR/weights.safetensors, DIR/ids.json and DIR/replay.bin (uint8 [T, layers, top_k]),
writes DIR/torch.json with the log-softmax rows (no replay, and replaying replay.bin), the
router's own expert choices, and the value estimates.

    python3 clients/python/tests/parity.py DIR
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from t1_trainer.tinymoe import TinyMoE  # noqa: E402


def main(folder):
    with open(os.path.join(folder, "weights.safetensors"), "rb") as f:
        model, version = TinyMoE.from_bytes(f.read())
    with open(os.path.join(folder, "ids.json")) as f:
        ids = torch.tensor(json.load(f), dtype=torch.long)
    with open(os.path.join(folder, "replay.bin"), "rb") as f:
        raw = bytearray(f.read())
    replay = torch.frombuffer(raw, dtype=torch.uint8).long().reshape(len(ids), -1, model.config["num_experts_per_tok"])
    with torch.no_grad():
        logits, values, routing, _ = model(ids)
        replayed, _, used, _ = model(ids, replay=replay)
    out = {
        "version": version,
        "logprobs": torch.log_softmax(logits, dim=-1).tolist(),
        "replayed_logprobs": torch.log_softmax(replayed, dim=-1).tolist(),
        # One row per layer, as t1's samplers record them (a dense layer's row 0).
        "routing": model.layer_rows(routing).tolist(),
        "replayed_routing": model.layer_rows(used).tolist(),
        "values": values.tolist(),
    }
    with open(os.path.join(folder, "torch.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1])
