"""t1's TinyMoE in PyTorch, parameter for parameter (names and shapes as model/moe/params.ts
writes them): token embedding; per layer RMSNorm → q, k, v projections (no bias) → RoPE over
interleaved pairs of each head → causal softmax attention → output projection → residual;
RMSNorm → router → top-k experts, gates softmax over the chosen experts' router logits, SiLU
expert MLPs (d → F → d) → residual; final RMSNorm, LM head and value head.

R3 (rollout routing replay): `forward(ids, replay=rows)` uses the sampler's expert ids instead
of the router's top-k — the gates are still the softmax of the current router logits over the
replayed experts, so the router learns — as the TypeScript learner does.
"""

import json
import math

import torch

from . import safetensors

LAYER_KEYS = ("attnNorm", "wq", "wk", "wv", "wo", "ffnNorm", "router", "w1", "w2")


def _shapes(c):
    d, E, F = c["dModel"], c["nExperts"], c["dFf"]
    layer = {
        "attnNorm": [d],
        "wq": [d, d],
        "wk": [d, d],
        "wv": [d, d],
        "wo": [d, d],
        "ffnNorm": [d],
        "router": [d, E],
        "w1": [E, d, F],
        "w2": [E, F, d],
    }
    out = {"embed": [c["vocabSize"], d]}
    for i in range(c["nLayers"]):
        for key in LAYER_KEYS:
            out[f"layers.{i}.{key}"] = layer[key]
    out.update({"finalNorm": [d], "lmHead": [d, c["vocabSize"]], "valueHead": [d], "valueBias": [1]})
    return out


def _rms(x, gain, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


class TinyMoE(torch.nn.Module):
    def __init__(self, config, tensors, dtype=torch.float32):
        super().__init__()
        self.config = dict(config)
        shapes = _shapes(config)
        unknown = sorted(set(tensors) - set(shapes))
        if unknown:
            raise ValueError(f"not parameters of this model: {unknown}")
        self.params = torch.nn.ParameterDict()
        for name, shape in shapes.items():
            t = tensors.get(name)
            if t is None:
                raise ValueError(f"{name}: missing")
            if list(t.shape) != shape:
                raise ValueError(f"{name}: shape {list(t.shape)}, expected {shape}")
            # ParameterDict keys cannot hold dots.
            self.params[name.replace(".", "__")] = torch.nn.Parameter(t.to(dtype).clone())
        c = config
        self.hd = c["dModel"] // c["nHeads"]
        half = self.hd // 2
        inv = c["ropeTheta"] ** (-2 * torch.arange(half, dtype=torch.float64) / self.hd)
        ang = torch.arange(c["maxSeqLen"], dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cos(ang).to(dtype), persistent=False)
        self.register_buffer("sin", torch.sin(ang).to(dtype), persistent=False)

    def p(self, name):
        return self.params[name.replace(".", "__")]

    @classmethod
    def from_bytes(cls, data, dtype=torch.float32):
        """The model in a t1 weights file, and its policy version (0 when the file names none)."""
        tensors, metadata = safetensors.read(data)
        if metadata.get("format") != safetensors.FORMAT:
            raise ValueError(f"format {metadata.get('format')!r}, expected {safetensors.FORMAT!r}")
        config = json.loads(metadata["config"])
        return cls(config, tensors, dtype), int(metadata.get("version", "0"))

    def to_bytes(self, version, extra=None):
        """A t1 weights file (F32) of the current parameters at `version`."""
        tensors = {name.replace("__", "."): p.detach() for name, p in self.params.items()}
        metadata = {
            **(extra or {}),
            "format": safetensors.FORMAT,
            "config": json.dumps(self.config, separators=(",", ":")),
            "version": str(version),
        }
        return safetensors.write(tensors, metadata)

    def _rope(self, x, pos):
        # x [H, T, hd]: rotate interleaved pairs (2i, 2i+1) by each position's angles.
        c, s = self.cos[pos][None], self.sin[pos][None]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)

    def _route(self, logits, k):
        # Largest first, ties to the lower expert id (a stable sort), as model/moe/routing.ts.
        order = torch.sort(logits, dim=-1, descending=True, stable=True).indices
        return order[..., :k]

    def forward(self, ids, replay=None):
        """Logits [T, V], values [T], the experts used [T, layers, top_k] and the router logits
        [T, layers, experts] (for the load-balancing loss) for token ids [T].

        `replay`: expert ids [T, layers, top_k] to use instead of the router's choice (R3).
        """
        c = self.config
        T, d, H, k = ids.shape[0], c["dModel"], c["nHeads"], c["topK"]
        x = self.p("embed")[ids]
        pos = torch.arange(T)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        used, routers = [], []
        for i in range(c["nLayers"]):
            L = lambda key: self.p(f"layers.{i}.{key}")  # noqa: E731 - a local shorthand
            h = _rms(x, L("attnNorm"), c["normEps"])
            q = (h @ L("wq")).view(T, H, self.hd).transpose(0, 1)
            kk = (h @ L("wk")).view(T, H, self.hd).transpose(0, 1)
            v = (h @ L("wv")).view(T, H, self.hd).transpose(0, 1)
            q, kk = self._rope(q, pos), self._rope(kk, pos)
            s = (q @ kk.transpose(-1, -2)) / math.sqrt(self.hd)
            att = torch.softmax(s.masked_fill(causal, float("-inf")), dim=-1) @ v
            x = x + att.transpose(0, 1).reshape(T, d) @ L("wo")
            b = _rms(x, L("ffnNorm"), c["normEps"])
            logits = b @ L("router")
            experts = replay[:, i, :].long() if replay is not None else self._route(logits, k)
            gates = torch.softmax(logits.gather(-1, experts), dim=-1)
            out = torch.zeros_like(b)
            for e in range(c["nExperts"]):
                rows, slot = (experts == e).nonzero(as_tuple=True)
                if rows.numel() == 0:
                    continue
                hid = torch.nn.functional.silu(b[rows] @ L("w1")[e]) @ L("w2")[e]
                out = out.index_add(0, rows, hid * gates[rows, slot, None])
            x = x + out
            used.append(experts)
            routers.append(logits)
        f = _rms(x, self.p("finalNorm"), c["normEps"])
        values = f @ self.p("valueHead") + self.p("valueBias")
        return f @ self.p("lmHead"), values, torch.stack(used, dim=1), torch.stack(routers, dim=1)
