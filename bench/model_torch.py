#!/usr/bin/env python3
"""TinyMoE in PyTorch on CPU: the baseline that `npm run bench:model` (bench/model.ts) compares with.

The same architecture as model/moe/ (a small Qwen3-MoE, Hugging Face's `Qwen3MoeForCausalLM`
math): token embedding; per layer RMSNorm -> q, k, v projections (no bias) -> per-head RMSNorm
of q and k -> RoPE (rotate_half pairs) -> causal softmax attention with grouped-query heads ->
output projection -> residual; RMSNorm -> router -> top-k experts with gates softmax(top-k logits)
(= norm_topk_prob), one gather / scatter per expert (SwiGLU: down(silu(gate(x)) * up(x))) ->
residual; final RMSNorm, LM head and value head. One training step = zero_grad, forward,
next-token cross-entropy, backward (no optimiser).

    python3 bench/model_torch.py [--layers 4] [--d-model 128] [--heads 4] [--kv-heads H]
        [--head-dim D] [--experts 8] [--top-k 2] [--d-ff 256] [--vocab 1024] [--seq 256]
        [--batch 8] [--threads 2] [--reps 5] [--warmup 2] [--sample-tokens 64] [--prompt 32]

--kv-heads defaults to --heads, --head-dim to d-model / heads. Prints one JSON object on the last
line of stdout: train_tok_s (batch x seq tokens per step over the median step time), step_ms
(median), and sample_tok_s (batched greedy decode with a KV cache, generated tokens per second)
unless --sample-tokens 0. Exit status 3 when torch is missing.
"""

import argparse
import json
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - reported to bench/model.ts
    print(json.dumps({"error": f"torch is not importable: {e}"}))
    sys.exit(3)


def rms_norm(x, gain, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def attention(q, k, v, causal):
    # torch >= 2.0 has a fused kernel; Debian bookworm's 1.13 gets the explicit softmax(QKᵀ/√d)·V.
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if causal:
        T = q.shape[-2]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class TinyMoE(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        V, d, E, Fh = a.vocab, a.d_model, a.experts, a.d_ff
        self.a = a
        self.hd = a.head_dim
        qw, kvw = a.heads * self.hd, a.kv_heads * self.hd
        g = torch.Generator().manual_seed(0)

        def normal(*shape, std=0.02):
            return torch.nn.Parameter(torch.randn(*shape, generator=g) * std)

        res = 0.02 / math.sqrt(2 * a.layers)
        self.embed = normal(V, d)
        self.layers = torch.nn.ModuleList()
        for _ in range(a.layers):
            layer = torch.nn.Module()
            layer.attn_norm = torch.nn.Parameter(torch.ones(d))
            layer.wq = normal(d, qw)
            layer.wk = normal(d, kvw)
            layer.wv = normal(d, kvw)
            layer.wo = normal(qw, d, std=res)
            layer.q_norm = torch.nn.Parameter(torch.ones(self.hd))
            layer.k_norm = torch.nn.Parameter(torch.ones(self.hd))
            layer.ffn_norm = torch.nn.Parameter(torch.ones(d))
            layer.router = normal(d, E)
            layer.w_gate = normal(E, d, Fh)
            layer.w_up = normal(E, d, Fh)
            layer.w_down = normal(E, Fh, d, std=res)
            self.layers.append(layer)
        self.final_norm = torch.nn.Parameter(torch.ones(d))
        self.lm_head = normal(d, V)
        self.value_head = torch.nn.Parameter(torch.zeros(d))
        self.value_bias = torch.nn.Parameter(torch.zeros(1))
        inv = a.rope_theta ** (-torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd)
        ang = torch.arange(a.max_len, dtype=torch.float64)[:, None] * inv[None, :]
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", torch.cos(ang).float(), persistent=False)
        self.register_buffer("sin", torch.sin(ang).float(), persistent=False)

    def rope(self, x, pos):
        # x [B, H, T, hd]; HF's rotate_half: dims i and i + hd/2 form a pair.
        return x * self.cos[pos][None, None] + rotate_half(x) * self.sin[pos][None, None]

    def moe(self, layer, b):
        a = self.a
        rows = b.reshape(-1, b.shape[-1])
        logits = rows @ layer.router
        top, idx = logits.topk(a.top_k, dim=-1)
        gates = torch.softmax(top, dim=-1)
        out = torch.zeros_like(rows)
        flat_idx = idx.reshape(-1)
        flat_gates = gates.reshape(-1)
        for e in range(a.experts):
            members = (flat_idx == e).nonzero(as_tuple=True)[0]
            if members.numel() == 0:
                continue
            r = members // a.top_k
            x = rows[r]
            h = (F.silu(x @ layer.w_gate[e]) * (x @ layer.w_up[e])) @ layer.w_down[e]
            out = out.index_add(0, r, h * flat_gates[members, None])
        return out.reshape(b.shape)

    def forward(self, ids, cache=None, start=0):
        a = self.a
        B, T = ids.shape
        x = self.embed[ids]
        pos = torch.arange(start, start + T)
        groups = a.heads // a.kv_heads
        for li, layer in enumerate(self.layers):
            h = rms_norm(x, layer.attn_norm, a.eps)
            q = rms_norm((h @ layer.wq).view(B, T, a.heads, self.hd), layer.q_norm, a.eps)
            k = rms_norm((h @ layer.wk).view(B, T, a.kv_heads, self.hd), layer.k_norm, a.eps)
            v = (h @ layer.wv).view(B, T, a.kv_heads, self.hd).transpose(1, 2)
            q, k = self.rope(q.transpose(1, 2), pos), self.rope(k.transpose(1, 2), pos)
            if cache is not None:
                ck, cv = cache[li]
                ck[:, :, start : start + T] = k
                cv[:, :, start : start + T] = v
                k, v = ck[:, :, : start + T], cv[:, :, : start + T]
            if groups > 1:
                k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
            att = attention(q, k, v, T > 1)
            x = x + att.transpose(1, 2).reshape(B, T, -1) @ layer.wo
            x = x + self.moe(layer, rms_norm(x, layer.ffn_norm, a.eps))
        f = rms_norm(x, self.final_norm, a.eps)
        return f @ self.lm_head, f @ self.value_head + self.value_bias


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=None, help="key/value heads (default --heads)")
    p.add_argument("--head-dim", type=int, default=None, help="width of a head (default d-model / heads)")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=256)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--sample-tokens", type=int, default=64)
    p.add_argument("--prompt", type=int, default=32)
    a = p.parse_args()
    a.eps = 1e-5
    a.kv_heads = a.kv_heads or a.heads
    a.head_dim = a.head_dim or a.d_model // a.heads
    if a.heads % a.kv_heads or a.head_dim % 2:
        p.error("--kv-heads must divide --heads and --head-dim be even")
    a.rope_theta = 10000.0
    a.max_len = max(a.seq, a.prompt + a.sample_tokens) + 1

    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(0)
    model = TinyMoE(a)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=torch.Generator().manual_seed(1))

    def step():
        model.zero_grad(set_to_none=True)
        logits, values = model(ids)
        loss = F.cross_entropy(
            logits[:, :-1].reshape(-1, a.vocab), ids[:, 1:].reshape(-1), reduction="mean"
        )
        loss.backward()
        return loss.item()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    out = {
        "train_tok_s": a.batch * a.seq / step_s,
        "step_ms": step_s * 1000,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "blas": next(
            (line.strip() for line in torch.__config__.show().splitlines() if "BLAS_INFO" in line),
            "",
        ),
    }

    if a.sample_tokens > 0:
        hd = model.hd

        @torch.no_grad()
        def decode():
            cache = [
                (
                    torch.zeros(a.batch, a.kv_heads, a.max_len, hd),
                    torch.zeros(a.batch, a.kv_heads, a.max_len, hd),
                )
                for _ in range(a.layers)
            ]
            prompt = ids[:, : a.prompt]
            logits, _ = model(prompt, cache, 0)
            token = logits[:, -1].argmax(-1, keepdim=True)
            t0 = time.perf_counter()
            for i in range(a.sample_tokens):
                logits, _ = model(token, cache, a.prompt + i)
                token = logits[:, -1].argmax(-1, keepdim=True)
            return time.perf_counter() - t0

        decode()
        out["sample_tok_s"] = a.batch * a.sample_tokens / min(decode() for _ in range(2))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
