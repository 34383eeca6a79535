#!/usr/bin/env python3
"""TinyMoE in PyTorch on CPU: the baseline that `npm run bench:model` (bench/model.ts) compares with.

The same architecture as model/moe/: token embedding; per layer RMSNorm -> q, k, v projections
(no bias) -> RoPE over interleaved pairs of each head -> causal softmax attention -> output
projection -> residual; RMSNorm -> router -> top-k experts with gates softmax(top-k logits), one
gather / scatter per expert (SiLU MLP d -> F -> d) -> residual; final RMSNorm, LM head and value
head. One training step = zero_grad, forward, next-token cross-entropy, backward (no optimiser).

    python3 bench/model_torch.py [--layers 4] [--d-model 128] [--heads 4] [--experts 8]
        [--top-k 2] [--d-ff 256] [--vocab 1024] [--seq 256] [--batch 8]
        [--threads 2] [--reps 5] [--warmup 2] [--sample-tokens 64] [--prompt 32]

Prints one JSON object on the last line of stdout: train_tok_s (batch x seq tokens per step over
the median step time), step_ms (median), and sample_tok_s (batched greedy decode with a KV cache,
generated tokens per second) unless --sample-tokens 0. Exit status 3 when torch is missing.
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


class TinyMoE(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        V, d, E, Fh = a.vocab, a.d_model, a.experts, a.d_ff
        self.a = a
        self.hd = d // a.heads
        g = torch.Generator().manual_seed(0)

        def normal(*shape, std=0.02):
            return torch.nn.Parameter(torch.randn(*shape, generator=g) * std)

        res = 0.02 / math.sqrt(2 * a.layers)
        self.embed = normal(V, d)
        self.layers = torch.nn.ModuleList()
        for _ in range(a.layers):
            layer = torch.nn.Module()
            layer.attn_norm = torch.nn.Parameter(torch.ones(d))
            layer.wq = normal(d, d)
            layer.wk = normal(d, d)
            layer.wv = normal(d, d)
            layer.wo = normal(d, d, std=res)
            layer.ffn_norm = torch.nn.Parameter(torch.ones(d))
            layer.router = normal(d, E)
            layer.w1 = normal(E, d, Fh)
            layer.w2 = normal(E, Fh, d, std=res)
            self.layers.append(layer)
        self.final_norm = torch.nn.Parameter(torch.ones(d))
        self.lm_head = normal(d, V)
        self.value_head = torch.nn.Parameter(torch.zeros(d))
        self.value_bias = torch.nn.Parameter(torch.zeros(1))
        half = self.hd // 2
        inv = a.rope_theta ** (-2 * torch.arange(half, dtype=torch.float64) / self.hd)
        ang = torch.arange(a.max_len, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cos(ang).float(), persistent=False)
        self.register_buffer("sin", torch.sin(ang).float(), persistent=False)

    def rope(self, x, pos):
        # x [B, H, T, hd]; rotate interleaved pairs (2i, 2i+1) by the angle of each position.
        c = self.cos[pos][None, None]
        s = self.sin[pos][None, None]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)

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
            h = F.silu(rows[r] @ layer.w1[e]) @ layer.w2[e]
            out = out.index_add(0, r, h * flat_gates[members, None])
        return out.reshape(b.shape)

    def forward(self, ids, cache=None, start=0):
        a = self.a
        B, T = ids.shape
        x = self.embed[ids]
        pos = torch.arange(start, start + T)
        for li, layer in enumerate(self.layers):
            h = rms_norm(x, layer.attn_norm, a.eps)
            q = (h @ layer.wq).view(B, T, a.heads, self.hd).transpose(1, 2)
            k = (h @ layer.wk).view(B, T, a.heads, self.hd).transpose(1, 2)
            v = (h @ layer.wv).view(B, T, a.heads, self.hd).transpose(1, 2)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if cache is not None:
                ck, cv = cache[li]
                ck[:, :, start : start + T] = k
                cv[:, :, start : start + T] = v
                k, v = ck[:, :, : start + T], cv[:, :, : start + T]
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
                    torch.zeros(a.batch, a.heads, a.max_len, hd),
                    torch.zeros(a.batch, a.heads, a.max_len, hd),
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
