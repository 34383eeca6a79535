"""The PPO actor-critic loss of t1's learner (actors/learner/ppo), in PyTorch.

A trajectory of n tokens is scored by one forward pass over ids[0 .. n−1); row r predicts token
r + 1. Rows whose target the policy generated (loss mask 1) are action rows. The episode reward
(passing tests / tests total) sits on the row of the last generated token.

Per action row, with z = logits / T, logp = log_softmax(z)[target]:
  ratio = exp(logp − prox)                   prox: the learner's logp at the start of the update
  w     = min(exp(prox − behaviour), C)      truncated importance sampling from the sampler (TIS)
  policy loss = −w · min(ratio · A, clip(ratio, 1 − ε_low, 1 + ε_high) · A)
  entropy H = −Σ p log p
Per row (every row: GAE runs through observations, the critic learns on them):
  value loss = ½ · max((V − G)², (V_old + clip(V − V_old, ±c_v) − G)²)
loss = (Σ policy − entropy_coef · Σ H) / action tokens + value_coef · Σ value / rows

Advantages: decoupled GAE (VC-PPO, VAPO) — the actor's λ for advantages, the critic's λ
(default 1: discounted Monte-Carlo returns) for the value targets — whitened over the batch's
action rows.
"""

import math

import torch

M32 = 0xFFFFFFFF


def trajectory_rows(t, vocab_size):
    """Per-row tensors of a t1.v1.Trajectory message (its packed little-endian arrays), cut after
    its last generated token as t1's learner cuts it (actors/learner/decode.ts); None when there
    is nothing to train on or it cannot be trained on (a token outside the vocabulary, a
    non-finite reward or behaviour log-prob), as t1's learner drops it."""
    ids = torch.frombuffer(bytearray(t.token_ids), dtype=torch.int32).long() & 0xFFFFFFFF
    logprobs = torch.frombuffer(bytearray(t.logprobs), dtype=torch.float32).double()
    mask = torch.frombuffer(bytearray(t.loss_mask), dtype=torch.uint8).long()
    generated = mask.nonzero()
    last = int(generated.max()) if generated.numel() > 0 else -1
    if last < 1 or not math.isfinite(t.end.reward) or int(ids[: last + 1].max()) >= vocab_size:
        return None
    ids, logprobs, mask = ids[: last + 1], logprobs[: last + 1], mask[: last + 1]
    rows = last
    action = mask[1:].clone()
    if not torch.isfinite(logprobs[1:][action != 0]).all():
        return None
    reward = t.end.reward / t.end.tests_total if t.end.tests_total > 0 else t.end.reward
    rewards = torch.zeros(rows, dtype=torch.float64)
    rewards[rows - 1] = reward
    replay = None
    if len(t.routing) > 0:
        shape = list(t.routing_shape)
        dtype = torch.uint8 if t.routing_dtype in (0, 1) else torch.int16  # DTYPE_UINT8, _UINT16
        flat = torch.frombuffer(bytearray(t.routing), dtype=dtype).long()
        if dtype == torch.int16:
            flat = flat & 0xFFFF
        table = flat.reshape(shape)
        if table.shape[0] >= rows:
            replay = table[:rows]
    return {
        "episode_id": t.episode_id,
        "inputs": ids[:-1],
        "targets": ids[1:],
        "action": action,
        "behaviour": logprobs[1:],
        "rewards": rewards,
        "reward": reward,
        "resolved": t.end.resolved,
        "replay": replay,
    }


def load_balancing_loss(router_logits, experts):
    """Switch-Transformer load balancing summed over layers (model/moe/aux.ts): per layer
    E · Σ_e f_e · P_e, f_e the share of (row, slot) assignments to expert e (no gradient), P_e the
    mean router probability of e. router_logits [T, layers, E], experts [T, layers, top_k]."""
    T, layers, E = router_logits.shape
    probs = torch.softmax(router_logits.double(), dim=-1).mean(0)  # [layers, E]
    share = torch.zeros(layers, E, dtype=torch.float64)
    share.scatter_add_(1, experts.permute(1, 0, 2).reshape(layers, -1), torch.ones(layers, experts.shape[0] * experts.shape[2], dtype=torch.float64))
    share = share / (T * experts.shape[2])
    return E * (share * probs).sum()


def mix_seed(*parts):
    """A 32-bit seed mixed from several integers (actors/learner/ppo/schedule.ts mixSeed)."""
    h = 0x9E3779B9
    for p in parts:
        z = (h ^ (p & M32)) & M32
        z = ((z ^ (z >> 16)) * 0x85EBCA6B) & M32
        z = ((z ^ (z >> 13)) * 0xC2B2AE35) & M32
        h = (z ^ (z >> 16)) & M32
    return h


def _mulberry32(seed):
    """Uniform floats in [0, 1), the sequence of model/rng.ts Rng(seed).next()."""
    state = seed & M32
    while True:
        state = (state + 0x6D2B79F5) & M32
        t = state
        t = ((t ^ (t >> 15)) * (t | 1)) & M32
        t = (t ^ ((t + ((t ^ (t >> 7)) * (t | 61))) & M32)) & M32
        yield ((t ^ (t >> 14)) & M32) / 4294967296


def minibatch_order(n, minibatches, seed):
    """The minibatches of one epoch, as t1's learner cuts them: 0..n−1 shuffled (Fisher–Yates
    from `seed`) and cut into min(minibatches, n) consecutive parts of near-equal size."""
    order, rng = list(range(n)), _mulberry32(seed)
    for i in range(n - 1, 0, -1):
        j = math.floor(next(rng) * (i + 1))
        order[i], order[j] = order[j], order[i]
    parts, out, start = min(minibatches, n), [], 0
    for p in range(parts):
        size = n // parts + (1 if p < n % parts else 0)
        out.append(order[start : start + size])
        start += size
    return out


def decoupled_gae(rewards, values, gamma, actor_lambda, critic_lambda):
    """(advantages with the actor's λ, returns with the critic's λ) over one trajectory's rows."""

    def recurse(lam):
        n = rewards.numel()
        adv = torch.zeros(n, dtype=torch.float64)
        running, next_value = 0.0, 0.0
        for r in range(n - 1, -1, -1):
            v = float(values[r])
            delta = float(rewards[r]) + gamma * next_value - v
            running = delta + gamma * lam * running
            adv[r] = running
            next_value = v
        return adv, adv + values.double()

    advantages, returns = recurse(actor_lambda)
    if critic_lambda != actor_lambda:
        _, returns = recurse(critic_lambda)
    return advantages, returns


def whiten(advantages, action, center=True, eps=1e-8):
    """Advantages whitened over action rows (mean and population std of those rows only)."""
    picked = advantages[action != 0]
    if picked.numel() == 0:
        return advantages
    mean = picked.mean()
    std = ((picked - mean) ** 2).mean().sqrt()
    out = advantages.clone()
    sel = action != 0
    out[sel] = (advantages[sel] - (mean if center else 0)) / (std + eps)
    return out


def ppo_loss(logits, values, row, cfg, normalizer, value_normalizer, policy_weight=1.0):
    """The loss of one trajectory's rows (sum over its rows, scaled by the minibatch's
    normalizers) and its statistics, as actors/learner/ppo/loss.ts computes them."""
    z = logits.double() / cfg["temperature"]
    logsm = torch.log_softmax(z, dim=-1)
    action = row["action"] != 0
    logp = logsm.gather(-1, row["targets"][:, None])[:, 0]
    p = logsm.exp()
    entropy = -(p * logsm).sum(-1)
    prox = row["prox"]
    adv = row["advantages"]
    log_ratio = logp - prox
    ratio = log_ratio.exp()
    if cfg["tis"] is not None:
        raw = (prox - row["behaviour"]).exp()
        w = torch.clamp(raw, max=cfg["tis"])
        tis_clipped = (raw >= cfg["tis"]) & action
    else:
        w = torch.ones_like(ratio)
        tis_clipped = torch.zeros_like(action)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - cfg["clip_low"], 1 + cfg["clip_high"]) * adv
    objective = torch.minimum(unclipped, clipped)
    policy = -(w.detach() * objective)[action].sum()
    entropy_sum = entropy[action].sum()

    v = values.double()
    d1 = v - row["returns"]
    value_rows = 0.5 * d1 * d1
    if cfg["value_clip"] is not None:
        v_old = row["old_values"]
        d2 = v_old + torch.clamp(v - v_old, -cfg["value_clip"], cfg["value_clip"]) - row["returns"]
        value_rows = torch.maximum(value_rows, 0.5 * d2 * d2)
    value = value_rows.sum()

    loss = (
        policy_weight * (policy - cfg["entropy_coef"] * entropy_sum) / normalizer
        + cfg["value_coef"] * value / value_normalizer
    )
    k = int(action.sum())
    with torch.no_grad():
        stats = {
            "tokens": k,
            "rows": int(v.numel()),
            "policy": float(policy),
            "value": float(value),
            "entropy": float(entropy_sum),
            "clipped": int(((clipped < unclipped) & action).sum()),
            "tis_clipped": int(tis_clipped.sum()),
            "kl": float((ratio - 1 - log_ratio)[action].sum()),
            "logp": logp.detach(),
        }
    return loss, stats
