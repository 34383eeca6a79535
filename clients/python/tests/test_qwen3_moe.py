"""The PyTorch Qwen3-MoE (t1_trainer/qwen3_moe.py) against an independent computation written
position by position from transformers' modeling_qwen3_moe.py (softmax over every expert, then
top-k, then renormalisation; rotate_half pairs; repeat_kv; eager attention), in float64, over
configs that exercise grouped-query attention, a head_dim other than hidden/heads, attention
biases, un-normalised top-k gates, dense layers and tied embeddings; and R3 replay."""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from t1_trainer.qwen3_moe import Qwen3Moe, state_dict_shapes, parse_config  # noqa: E402

BASE = {
    "model_type": "qwen3_moe",
    "architectures": ["Qwen3MoeForCausalLM"],
    "vocab_size": 29,
    "hidden_size": 12,
    "intermediate_size": 10,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 4,
    "max_position_embeddings": 32,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "num_experts": 5,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 6,
    "norm_topk_prob": True,
    "tie_word_embeddings": False,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
}

VARIANTS = {
    "gqa, head_dim 4 of hidden 12, normalised top-k": {},
    "MQA, attention biases, un-normalised top-k": {"num_key_value_heads": 1, "attention_bias": True, "norm_topk_prob": False},
    "a dense layer (mlp_only_layers), tied embeddings, default head_dim": {
        "num_hidden_layers": 3,
        "mlp_only_layers": [1],
        "tie_word_embeddings": True,
        "head_dim": None,
        "num_attention_heads": 3,
        "num_key_value_heads": 3,
    },
    "decoder_sparse_step 2": {"num_hidden_layers": 2, "decoder_sparse_step": 2},
}


def config_of(**over):
    c = {**BASE, **over}
    return {k: v for k, v in c.items() if v is not None}


def random_tensors(config, seed=0, critic=True):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in state_dict_shapes(parse_config(config), critic=critic).items():
        scale = 0.3 if not name.endswith("norm.weight") else 0.2
        base = 1.0 if name.endswith("norm.weight") else 0.0
        out[name] = base + torch.randn(*shape, generator=g, dtype=torch.float64) * scale
    if config.get("tie_word_embeddings"):
        out["lm_head.weight"] = out["model.embed_tokens.weight"]
    return out


def model_of(config, seed=0, dtype=torch.float64):
    m = Qwen3Moe(config, critic=True, dtype=dtype)
    m.load_tensors(random_tensors(config, seed))
    return m


# ---- the independent computation: one position, one head, one expert at a time -------------


def rms(x, w, eps):
    return w * (x / math.sqrt(float((x * x).mean()) + eps))


def reference(config, t, ids):
    """Logits [T, V] and values [T] of Qwen3MoeForCausalLM as its source reads, in float64."""
    c = {**{"attention_bias": False, "norm_topk_prob": False, "mlp_only_layers": [], "decoder_sparse_step": 1}, **config}
    d, H, KV = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or d // H
    eps, theta = c["rms_norm_eps"], c["rope_theta"]
    T = len(ids)
    lin = lambda x, name: t[name + ".weight"] @ x + (t[name + ".bias"] if name + ".bias" in t else 0)  # noqa: E731

    def rope(v, pos):
        out = v.clone()
        half = hd // 2
        for i in range(half):
            ang = pos * theta ** (-(2 * i) / hd)
            a, b = v[i], v[i + half]
            out[i] = a * math.cos(ang) - b * math.sin(ang)
            out[i + half] = b * math.cos(ang) + a * math.sin(ang)
        return out

    def swiglu(x, p):
        g = lin(x, p + ".gate_proj")
        return lin((g * torch.sigmoid(g)) * lin(x, p + ".up_proj"), p + ".down_proj")

    xs = [t["model.embed_tokens.weight"][i].clone() for i in ids]
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        hs = [rms(x, t[p + ".input_layernorm.weight"], eps) for x in xs]
        qs, ks, vs = [], [], []
        for pos, h in enumerate(hs):
            q = lin(h, p + ".self_attn.q_proj").reshape(H, hd)
            k = lin(h, p + ".self_attn.k_proj").reshape(KV, hd)
            v = lin(h, p + ".self_attn.v_proj").reshape(KV, hd)
            qs.append([rope(rms(q[j], t[p + ".self_attn.q_norm.weight"], eps), pos) for j in range(H)])
            ks.append([rope(rms(k[j], t[p + ".self_attn.k_norm.weight"], eps), pos) for j in range(KV)])
            vs.append([v[j] for j in range(KV)])
        for pos in range(T):
            heads = []
            for j in range(H):
                kv = j // (H // KV)
                scores = torch.tensor([float(qs[pos][j] @ ks[s][kv]) / math.sqrt(hd) for s in range(pos + 1)], dtype=torch.float64)
                w = torch.softmax(scores, dim=0)
                heads.append(sum(w[s] * vs[s][kv] for s in range(pos + 1)))
            xs[pos] = xs[pos] + lin(torch.cat(heads), p + ".self_attn.o_proj")
        sparse = layer not in c["mlp_only_layers"] and (layer + 1) % c["decoder_sparse_step"] == 0
        for pos in range(T):
            h = rms(xs[pos], t[p + ".post_attention_layernorm.weight"], eps)
            if not sparse:
                xs[pos] = xs[pos] + swiglu(h, p + ".mlp")
                continue
            probs = torch.softmax(lin(h, p + ".mlp.gate"), dim=0)
            top, chosen = torch.topk(probs, c["num_experts_per_tok"])
            if c["norm_topk_prob"]:
                top = top / top.sum()
            xs[pos] = xs[pos] + sum(top[s] * swiglu(h, f"{p}.mlp.experts.{int(e)}") for s, e in enumerate(chosen))
    fs = [rms(x, t["model.norm.weight"], eps) for x in xs]
    head = t["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else t["lm_head.weight"]
    logits = torch.stack([head @ f for f in fs])
    values = torch.stack([t["value_head.weight"][0] @ f + t["value_head.bias"][0] for f in fs])
    return logits, values


def test_forward_matches_the_independent_computation():
    ids = [3, 17, 0, 28, 9, 9, 11, 5]
    for name, over in VARIANTS.items():
        config = config_of(**over)
        model = model_of(config, seed=len(name))
        with torch.no_grad():
            logits, values, used, routers = model(torch.tensor(ids))
        want_logits, want_values = reference(config, random_tensors(config, seed=len(name)), ids)
        gap = float((logits - want_logits).abs().max())
        assert gap < 1e-10, f"{name}: logits differ by {gap}"
        assert float((values - want_values).abs().max()) < 1e-10, name
        routed = model.routed_layers
        assert list(used.shape) == [len(ids), routed, 2] and list(routers.shape) == [len(ids), routed, 5], name


def test_float32_forward_stays_close_to_float64():
    config = config_of()
    tensors = random_tensors(config, 3)
    m32 = Qwen3Moe(config, critic=True)
    m32.load_tensors(tensors)
    ids = torch.tensor([1, 2, 3, 4, 5, 6])
    with torch.no_grad():
        a = m32(ids)[0].double()
        b = model_of(config, 3)(ids)[0]
    assert float((a - b).abs().max()) < 1e-5


def test_the_independent_computation_tells_a_wrong_rope_pairing_apart():
    # Interleaved pairs (2i, 2i + 1), t1's former convention, against HF's halves: the check above
    # would catch a forward that rotated the wrong pairs.
    config = config_of()
    model = model_of(config, 1)
    ids = torch.tensor([4, 8, 15, 16, 23])
    with torch.no_grad():
        right = model(ids)[0]
        perm = torch.arange(4).reshape(2, 2).t().reshape(-1)  # (0, 2, 1, 3): halves ↔ interleaved
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                w = proj.weight.view(-1, 4, proj.weight.shape[-1])
                w.copy_(w[:, perm])
        wrong = model(ids)[0]
    assert float((right - wrong).abs().max()) > 1e-3


def test_replay_uses_the_given_experts_and_the_router_still_learns():
    config = config_of()
    model = model_of(config, 2)
    ids = torch.tensor([2, 7, 1, 8, 2, 8, 1, 8])
    with torch.no_grad():
        logits, _, routing, _ = model(ids)
        same = model(ids, replay=routing)[0]
    other = (routing + 1) % config["num_experts"]
    other = torch.where(other[..., :1] == other[..., 1:], (other + 1) % config["num_experts"], other)
    replayed, _, used, _ = model(ids, replay=other)
    assert torch.equal(used, other)
    assert float((same - logits).abs().max()) == 0.0
    assert float((replayed - logits).abs().max()) > 1e-4
    replayed.logsumexp(-1).sum().backward()
    gate = model.model.layers[0].mlp.gate.weight.grad
    assert gate is not None and float(gate.abs().max()) > 0


def test_replay_of_the_wrong_shape_or_ids_is_refused():
    config = config_of()
    model = model_of(config)
    ids = torch.tensor([1, 2, 3])
    for bad, words in (
        (torch.zeros(3, 1, 2, dtype=torch.long), "shape"),
        (torch.full((3, 2, 2), 5), "[0, 5)"),
        (torch.zeros(3, 2, 2, dtype=torch.long), "repeats"),
    ):
        try:
            model(ids, replay=bad)
        except ValueError as e:
            assert words in str(e), str(e)
        else:
            raise AssertionError(f"replay {bad.shape} accepted")


def test_configs_it_cannot_compute_are_refused_by_field():
    from t1_trainer.qwen3_moe import ConfigError

    for over, field in (
        ({"model_type": "llama"}, "model_type"),
        ({"architectures": ["LlamaForCausalLM"]}, "architectures"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"use_sliding_window": True}, "use_sliding_window"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling"),
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 5.0}}, "rope_parameters.rope_theta"),
        ({"num_key_value_heads": 3}, "num_key_value_heads"),
        ({"head_dim": 3}, "head_dim"),
        ({"num_experts_per_tok": 6}, "num_experts_per_tok"),
        ({"attention_dropout": 0.1}, "attention_dropout"),
    ):
        try:
            parse_config(config_of(**over))
        except ConfigError as e:
            assert e.field == field, (over, e.field)
        else:
            raise AssertionError(f"{over} accepted")


def test_fields_left_out_take_qwen3moeconfig_defaults():
    c = parse_config({"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 8})
    assert c["num_key_value_heads"] == 4 and c["norm_topk_prob"] is False and c["head_dim"] == 8
    assert c["rms_norm_eps"] == 1e-6 and c["sparse_layers"] == list(range(24))
    # transformers 5's rope_parameters spelling is read too.
    assert parse_config(config_of(rope_theta=None, rope_parameters={"rope_type": "default", "rope_theta": 500.0}))["rope_theta"] == 500.0


def test_a_routing_table_with_one_row_per_layer_replays_the_routed_layers_rows():
    config = config_of(num_hidden_layers=3, mlp_only_layers=[1])
    model = model_of(config, 5)
    ids = torch.tensor([3, 1, 4, 1, 5])
    with torch.no_grad():
        _, _, routing, _ = model(ids)
        other = torch.stack([routing[..., 1], routing[..., 0]], dim=-1)
        other = (other + 2) % config["num_experts"]
        table = torch.zeros(5, 3, 2, dtype=torch.long)  # t1's layout: the dense layer's row unused
        table[:, 0], table[:, 2] = other[:, 0], other[:, 1]
        a = model(ids, replay=other)
        b = model(ids, replay=table)
    assert torch.equal(a[0], b[0]) and torch.equal(b[2], other)
