"""Qwen3-MoE in PyTorch: the math of Hugging Face's `Qwen3MoeForCausalLM`
(transformers/models/qwen3_moe/modeling_qwen3_moe.py), written for t1 from that reference, with
modules named so that `state_dict()` has the Hugging Face names and [out, in] layouts — a
checkpoint an engine serves loads here by name and nothing else.

Per decoder layer: RMSNorm (in float32) → q, k, v projections → per-head RMSNorm of q and k
(`q_norm`, `k_norm`, over head_dim) → RoPE (rotate_half: dims i and i + head_dim/2 form a pair,
inv_freq_i = theta^(−2i/head_dim)) → causal softmax attention scaled by head_dim^−0.5 with
grouped-query heads → o_proj → residual; RMSNorm → sparse MoE block (router `gate`, softmax over
the experts, top-k, renormalised over the k when `norm_topk_prob`; SwiGLU experts
down(silu(gate(x)) · up(x))) or a dense SwiGLU MLP (`mlp_only_layers`, `decoder_sparse_step`) →
residual. Final RMSNorm, `lm_head` (or the embedding when `tie_word_embeddings`).

t1 additions, outside Qwen3-MoE: a critic (`value_head`, a Linear d → 1 on the final normed
state) when the model is built with one, and rollout routing replay (R3): `forward(ids,
replay=rows)` uses the sampler's expert ids instead of the router's top-k, with the gates still
computed from the current router logits over those experts, so the router gets gradients.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

MODEL_TYPE = "qwen3_moe"
ARCHITECTURE = "Qwen3MoeForCausalLM"
CRITIC = ("value_head.weight", "value_head.bias")

# Qwen3MoeConfig's defaults (configuration_qwen3_moe.py): a config.json field left out means this.
DEFAULTS = {
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 24,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "hidden_act": "silu",
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "attention_bias": False,
    "use_sliding_window": False,
    "attention_dropout": 0.0,
    "decoder_sparse_step": 1,
    "moe_intermediate_size": 768,
    "num_experts_per_tok": 8,
    "num_experts": 128,
    "norm_topk_prob": False,
    "mlp_only_layers": [],
}


class ConfigError(ValueError):
    """A config.json this model cannot compute as Hugging Face would; the message names the field."""

    def __init__(self, field, message):
        super().__init__(f"config.json {field}: {message}")
        self.field = field


def _positive_int(c, field):
    v = c[field]
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ConfigError(field, f"expected a positive integer, got {v!r}")
    return v


def _rope_theta(c, raw):
    scaling = c.get("rope_scaling")
    if scaling is not None and (scaling.get("rope_type", scaling.get("type")) or "default") != "default":
        raise ConfigError("rope_scaling", f"only default RoPE is implemented, got {scaling!r}")
    # rope_theta: null (transformers 5 writes rope_parameters instead) falls back to the default.
    theta = DEFAULTS["rope_theta"] if c["rope_theta"] is None else c["rope_theta"]
    params = c.get("rope_parameters")
    # transformers 5 spells the RoPE settings rope_parameters; either spelling is read.
    if params is not None:
        if not isinstance(params, dict):
            raise ConfigError("rope_parameters", f"expected an object, got {params!r}")
        if params.get("rope_type", "default") != "default":
            raise ConfigError("rope_parameters.rope_type", f"only default RoPE is implemented, got {params['rope_type']!r}")
        if "rope_theta" in params:
            if raw.get("rope_theta") is not None and raw["rope_theta"] != params["rope_theta"]:
                raise ConfigError("rope_parameters.rope_theta", f"{params['rope_theta']} disagrees with rope_theta {raw['rope_theta']}")
            theta = params["rope_theta"]
    if not isinstance(theta, (int, float)) or not math.isfinite(theta) or theta <= 0:
        raise ConfigError("rope_theta", f"expected a positive number, got {theta!r}")
    return float(theta)


def parse_config(raw):
    """The settings of a Qwen3-MoE config.json (a dict), with Qwen3MoeConfig's defaults for the
    fields it leaves out. Refuses, naming the field, another architecture and what this model
    does not compute (another activation, sliding-window attention, scaled RoPE, dropout)."""
    if not isinstance(raw, dict):
        raise ConfigError("(root)", "expected a JSON object")
    if raw.get("model_type") != MODEL_TYPE:
        raise ConfigError("model_type", f"expected {MODEL_TYPE!r}, got {raw.get('model_type')!r}")
    arch = raw.get("architectures")
    if arch is not None and ARCHITECTURE not in arch:
        raise ConfigError("architectures", f"expected [{ARCHITECTURE!r}], got {arch!r}")
    c = {**DEFAULTS, **raw}
    if c["mlp_only_layers"] is None:
        c["mlp_only_layers"] = []
    for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "max_position_embeddings"):
        _positive_int(c, field)
    if c["hidden_act"] != "silu":
        raise ConfigError("hidden_act", f"only silu is implemented, got {c['hidden_act']!r}")
    if c["use_sliding_window"]:
        raise ConfigError("use_sliding_window", "sliding-window attention is not implemented")
    if c["attention_dropout"]:
        raise ConfigError("attention_dropout", f"dropout is not implemented, got {c['attention_dropout']!r}")
    # Qwen3MoeAttention: getattr(config, "head_dim", hidden_size // num_attention_heads).
    c["head_dim"] = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    _positive_int(c, "head_dim")
    if c["head_dim"] % 2:
        raise ConfigError("head_dim", f"RoPE rotates pairs: expected an even width, got {c['head_dim']}")
    if c["num_attention_heads"] % c["num_key_value_heads"]:
        raise ConfigError("num_key_value_heads", f"{c['num_key_value_heads']} does not divide num_attention_heads {c['num_attention_heads']}")
    c["rope_theta"] = _rope_theta(c, raw)
    eps = c["rms_norm_eps"]
    if not isinstance(eps, (int, float)) or not (eps > 0 and math.isfinite(eps)):
        raise ConfigError("rms_norm_eps", f"expected a positive number, got {eps!r}")
    if not isinstance(c["mlp_only_layers"], list) or any(not isinstance(i, int) for i in c["mlp_only_layers"]):
        raise ConfigError("mlp_only_layers", f"expected a list of layer indices, got {c['mlp_only_layers']!r}")
    c["sparse_layers"] = [i for i in range(c["num_hidden_layers"]) if is_sparse(c, i)]
    if c["sparse_layers"]:
        for field in ("num_experts", "num_experts_per_tok", "moe_intermediate_size"):
            _positive_int(c, field)
        if c["num_experts_per_tok"] > c["num_experts"]:
            raise ConfigError("num_experts_per_tok", f"{c['num_experts_per_tok']} > num_experts {c['num_experts']}")
    if len(c["sparse_layers"]) < c["num_hidden_layers"]:
        _positive_int(c, "intermediate_size")
    return c


def is_sparse(c, i):
    """Whether layer i is a sparse MoE block (Qwen3MoeDecoderLayer's rule)."""
    step = c["decoder_sparse_step"]
    return i not in c["mlp_only_layers"] and c["num_experts"] > 0 and step > 0 and (i + 1) % step == 0


def state_dict_shapes(c, critic=False):
    """Name → shape of every tensor `Qwen3MoeForCausalLM(config).state_dict()` holds (plus t1's
    critic when asked), in the order the model declares them."""
    d, hd, H, KV = c["hidden_size"], c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
    out = {"model.embed_tokens.weight": [c["vocab_size"], d]}
    bias = c["attention_bias"]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}"
        for proj, rows, cols in (("q_proj", H * hd, d), ("k_proj", KV * hd, d), ("v_proj", KV * hd, d), ("o_proj", d, H * hd)):
            out[f"{p}.self_attn.{proj}.weight"] = [rows, cols]
            if bias:
                out[f"{p}.self_attn.{proj}.bias"] = [rows]
        out[f"{p}.self_attn.q_norm.weight"] = [hd]
        out[f"{p}.self_attn.k_norm.weight"] = [hd]
        if is_sparse(c, i):
            out[f"{p}.mlp.gate.weight"] = [c["num_experts"], d]
            F_ = c["moe_intermediate_size"]
            for e in range(c["num_experts"]):
                out[f"{p}.mlp.experts.{e}.gate_proj.weight"] = [F_, d]
                out[f"{p}.mlp.experts.{e}.up_proj.weight"] = [F_, d]
                out[f"{p}.mlp.experts.{e}.down_proj.weight"] = [d, F_]
        else:
            I_ = c["intermediate_size"]
            out[f"{p}.mlp.gate_proj.weight"] = [I_, d]
            out[f"{p}.mlp.up_proj.weight"] = [I_, d]
            out[f"{p}.mlp.down_proj.weight"] = [d, I_]
        out[f"{p}.input_layernorm.weight"] = [d]
        out[f"{p}.post_attention_layernorm.weight"] = [d]
    out["model.norm.weight"] = [d]
    out["lm_head.weight"] = [c["vocab_size"], d]
    if critic:
        out["value_head.weight"] = [1, d]
        out["value_head.bias"] = [1]
    return out


class RMSNorm(nn.Module):
    """weight · x · rsqrt(mean(x²) + eps), the normalisation computed in float32 (or wider)."""

    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x if dtype == torch.float64 else x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


class Embedding(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n, d))

    def forward(self, ids):
        return F.embedding(ids, self.weight)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["hidden_size"], c["head_dim"]
        self.heads, self.kv_heads, self.hd = c["num_attention_heads"], c["num_key_value_heads"], hd
        bias = bool(c["attention_bias"])
        self.q_proj = nn.Linear(d, self.heads * hd, bias=bias)
        self.k_proj = nn.Linear(d, self.kv_heads * hd, bias=bias)
        self.v_proj = nn.Linear(d, self.kv_heads * hd, bias=bias)
        self.o_proj = nn.Linear(self.heads * hd, d, bias=bias)
        self.q_norm = RMSNorm(hd, c["rms_norm_eps"])
        self.k_norm = RMSNorm(hd, c["rms_norm_eps"])

    def forward(self, x, cos, sin):
        T = x.shape[0]
        q = self.q_norm(self.q_proj(x).view(T, self.heads, self.hd)).transpose(0, 1)
        k = self.k_norm(self.k_proj(x).view(T, self.kv_heads, self.hd)).transpose(0, 1)
        v = self.v_proj(x).view(T, self.kv_heads, self.hd).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Grouped-query attention: query head h reads key/value head h // (heads / kv_heads).
        groups = self.heads // self.kv_heads
        k = k.repeat_interleave(groups, dim=0)
        v = v.repeat_interleave(groups, dim=0)
        scores = (q @ k.transpose(-1, -2)) * (self.hd**-0.5)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        return self.o_proj((weights @ v).transpose(0, 1).reshape(T, self.heads * self.hd))


class MLP(nn.Module):
    """SwiGLU: down_proj(silu(gate_proj(x)) · up_proj(x)), one expert or a dense layer."""

    def __init__(self, d, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class SparseMoeBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.k, self.n = c["num_experts_per_tok"], c["num_experts"]
        self.norm_topk_prob = bool(c["norm_topk_prob"])
        self.gate = nn.Linear(c["hidden_size"], self.n, bias=False)
        self.experts = nn.ModuleList(MLP(c["hidden_size"], c["moe_intermediate_size"]) for _ in range(self.n))

    def forward(self, x, replay=None):
        """(output, experts used [T, k], router logits [T, E]); `replay` [T, k]: the experts to use."""
        logits = self.gate(x)
        if replay is None:
            # Largest logit first (softmax keeps the order), ties to the lower expert id.
            experts = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, : self.k]
        else:
            experts = replay
        wide = logits if logits.dtype == torch.float64 else logits.to(torch.float32)
        if self.norm_topk_prob:
            # softmax over all experts, renormalised over the chosen k = softmax over their logits.
            gates = torch.softmax(wide.gather(-1, experts), dim=-1)
        else:
            gates = torch.softmax(wide, dim=-1).gather(-1, experts)
        gates = gates.to(x.dtype)
        out = torch.zeros_like(x)
        for e in range(self.n):
            rows, slot = (experts == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            out = out.index_add(0, rows, self.experts[e](x[rows]) * gates[rows, slot, None])
        return out, experts, logits


class DecoderLayer(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        self.self_attn = Attention(c)
        self.sparse = is_sparse(c, i)
        self.mlp = SparseMoeBlock(c) if self.sparse else MLP(c["hidden_size"], c["intermediate_size"])
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Backbone(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(c, i) for i in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Qwen3Moe(nn.Module):
    """`Qwen3MoeForCausalLM`'s forward over one sequence, with an optional critic.

    `config`: a config.json dict (checked by `parse_config`). Parameters start at zero (norm
    gains at one): load a checkpoint with `load_tensors`, or see hf_checkpoint.load.
    """

    def __init__(self, config, critic=False, dtype=torch.float32):
        super().__init__()
        self.raw_config = dict(config)
        self.config = c = parse_config(config)
        self.model = Backbone(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.value_head = nn.Linear(c["hidden_size"], 1) if critic else None
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.fill_(1.0 if name.endswith("norm.weight") else 0.0)
        self.to(dtype)
        hd = c["head_dim"]
        inv_freq = c["rope_theta"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        angles = torch.arange(c["max_position_embeddings"], dtype=torch.float64)[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)

    @property
    def has_critic(self):
        return self.value_head is not None

    @property
    def routed_layers(self):
        """How many layers route (the second dimension of a replay table)."""
        return len(self.config["sparse_layers"])

    def expected_shapes(self):
        return state_dict_shapes(self.config, critic=self.has_critic)

    def load_tensors(self, tensors, origin=lambda name: "tensors"):
        """Copy name → tensor into the parameters, by Hugging Face name. Every parameter must be
        given (`lm_head.weight` may be left out when tied) with its shape, every value finite;
        a name the model does not have is refused. `origin(name)`: the file a tensor came from,
        for the error messages."""
        shapes = self.expected_shapes()
        tied = self.config["tie_word_embeddings"]
        unknown = sorted(set(tensors) - set(shapes))
        if unknown:
            raise CheckpointError(origin(unknown[0]), unknown[0], f"not a tensor of {ARCHITECTURE} for this config.json")
        for name, shape in shapes.items():
            if name not in tensors:
                if tied and name == "lm_head.weight":
                    continue
                raise CheckpointError("(checkpoint)", name, "missing")
            t = tensors[name]
            if list(t.shape) != shape:
                raise CheckpointError(origin(name), name, f"shape {list(t.shape)}, expected {shape}")
            if not bool(torch.isfinite(t).all()):
                raise CheckpointError(origin(name), name, "holds non-finite values (NaN or Inf)")
        if tied and "lm_head.weight" in tensors and not torch.equal(tensors["lm_head.weight"], tensors["model.embed_tokens.weight"]):
            raise CheckpointError(origin("lm_head.weight"), "lm_head.weight", "differs from model.embed_tokens.weight but tie_word_embeddings is true")
        params = dict(self.named_parameters())
        with torch.no_grad():
            for name in shapes:
                if name in tensors and name in params:
                    params[name].copy_(tensors[name].to(params[name].dtype))

    def forward(self, ids, replay=None):
        """For token ids [T]: logits [T, V], values [T] (None without a critic), the experts used
        [T, routed layers, k] and the router logits [T, routed layers, E] (for the
        load-balancing loss; empty without routed layers).

        `replay`: expert ids [T, routed layers, k] (or [T, layers, k], dense layers' rows unused)
        to use instead of the router's top-k (R3).
        """
        c = self.config
        T = ids.shape[0]
        if T > c["max_position_embeddings"]:
            raise ValueError(f"{T} tokens exceed max_position_embeddings {c['max_position_embeddings']}")
        if replay is not None:
            replay = self._check_replay(replay, T)
        x = self.model.embed_tokens(ids)
        cos, sin = self.cos[:T], self.sin[:T]
        used, routers, routed = [], [], 0
        for layer in self.model.layers:
            x = x + layer.self_attn(layer.input_layernorm(x), cos, sin)
            h = layer.post_attention_layernorm(x)
            if layer.sparse:
                out, experts, logits = layer.mlp(h, None if replay is None else replay[:, routed, :])
                used.append(experts)
                routers.append(logits)
                routed += 1
            else:
                out = layer.mlp(h)
            x = x + out
        f = self.model.norm(x)
        logits = self.lm_head(f)
        values = self.value_head(f)[:, 0] if self.value_head is not None else None
        if used:
            return logits, values, torch.stack(used, dim=1), torch.stack(routers, dim=1)
        k, E = c["num_experts_per_tok"], c["num_experts"]
        return logits, values, torch.zeros(T, 0, k, dtype=torch.long), torch.zeros(T, 0, E, dtype=logits.dtype)

    def routed_rows(self, table):
        """A routing table as the routed layers' rows [T, routed layers, k]: t1's samplers record
        one row per layer ([T, num_hidden_layers, k]; a dense layer's row is unused), which is
        the same when every layer routes."""
        table = torch.as_tensor(table).long()
        layers = self.config["num_hidden_layers"]
        if table.dim() == 3 and table.shape[1] == layers != self.routed_layers:
            table = table[:, self.config["sparse_layers"], :]
        return table

    def layer_rows(self, used):
        """The experts used [T, routed layers, k] in t1's samplers' layout, one row per layer
        [T, num_hidden_layers, k], a dense layer's row 0."""
        c = self.config
        out = torch.zeros(used.shape[0], c["num_hidden_layers"], c["num_experts_per_tok"], dtype=torch.long)
        out[:, c["sparse_layers"], :] = used
        return out

    def _check_replay(self, replay, T):
        replay = self.routed_rows(replay)
        want = [T, self.routed_layers, self.config["num_experts_per_tok"]]
        if list(replay.shape) != want:
            raise ValueError(f"replay: shape {list(replay.shape)}, expected {want} (positions, routed layers, top-k) or one row per layer")
        if replay.numel() and (int(replay.min()) < 0 or int(replay.max()) >= self.config["num_experts"]):
            raise ValueError(f"replay: expert ids must lie in [0, {self.config['num_experts']})")
        ordered = replay.sort(-1).values
        if replay.shape[-1] > 1 and bool((ordered[..., 1:] == ordered[..., :-1]).any()):
            raise ValueError("replay: an expert repeats within one position's top-k")
        return replay

    def token_logprobs(self, ids, replay=None, temperature=1.0):
        """log p(ids[r + 1] | ids[..r]) for r in [0, len − 1) (float64), the values of those
        positions (None without a critic) and the experts used, from one forward over ids[:-1]."""
        ids = torch.as_tensor(ids).long()
        logits, values, used, _ = self(ids[:-1], replay=replay)
        logsm = torch.log_softmax(logits.double() / temperature, dim=-1)
        return logsm.gather(-1, ids[1:, None])[:, 0], values, used


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model; the message names the file and the tensor."""

    def __init__(self, file, tensor, reason):
        super().__init__(f"{file}: {tensor}: {reason}")
        self.file, self.tensor, self.reason = file, tensor, reason
