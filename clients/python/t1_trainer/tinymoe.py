"""t1's TinyMoE in PyTorch: a small Qwen3-MoE (qwen3_moe.py, Hugging Face's math and names) with
t1's critic — a linear value head on the final normed state — read from and written to t1's
one-file weights, the file FetchWeights serves and PublishWeights takes (model/moe/weights.ts):
safetensors holding the Qwen3MoeForCausalLM state dict plus `value_head.weight` [1, d] and
`value_head.bias` [1], with metadata `format` "pt", `t1` "t1-tinymoe", `config` (config.json as
JSON) and `version`.

R3 (rollout routing replay): `forward(ids, replay=rows)` uses the sampler's expert ids instead
of the router's top-k; the gates are still the softmax of the current router logits over the
replayed experts, so the router learns, as the TypeScript learner does.
"""

import json

import torch

from . import safetensors
from .qwen3_moe import CRITIC, CheckpointError, Qwen3Moe


class TinyMoE(Qwen3Moe):
    """Qwen3-MoE with a critic (always: a file without one starts it at zero, as t1 does)."""

    def __init__(self, config, dtype=torch.float32):
        super().__init__(config, critic=True, dtype=dtype)

    @property
    def vocab_size(self):
        return self.config["vocab_size"]

    @classmethod
    def from_bytes(cls, data, dtype=torch.float32):
        """The model in a t1 weights file, and its policy version (0 when the file names none)."""
        tensors, metadata = safetensors.read(data, name="weights", dtype=dtype)
        if metadata.get("t1") != safetensors.FORMAT:
            raise CheckpointError("weights", "__metadata__.t1", f"expected {safetensors.FORMAT!r}, got {metadata.get('t1')!r}: not t1's weights file")
        if "config" not in metadata:
            raise CheckpointError("weights", "__metadata__.config", "missing")
        model = cls(json.loads(metadata["config"]), dtype)
        if not any(name in tensors for name in CRITIC):
            tensors.update({name: p.detach().clone() for name, p in model.value_head.named_parameters(prefix="value_head")})
        model.load_tensors(tensors, origin=lambda name: "weights")
        return model, int(metadata.get("version", "0"))

    def to_bytes(self, version, extra=None):
        """A t1 weights file (F32) of the current parameters at `version`."""
        state = self.state_dict()
        if self.config["tie_word_embeddings"]:
            state.pop("lm_head.weight", None)
        metadata = {
            **(extra or {}),
            "format": "pt",
            "t1": safetensors.FORMAT,
            "config": json.dumps(self.raw_config, separators=(",", ":")),
            "version": str(version),
        }
        return safetensors.write(state, metadata)
