"""t1's reference external learner: trains a t1 train job (learner.external = true) from PyTorch
through the gateway's TrainerService, and reads top to bottom like CleanRL.

    python3 -m t1_trainer.learner --gateway 127.0.0.1:50051 --job JOB [--trainer-id NAME]
        [--token TOKEN] [--threads N] [--lease-ttl-ms MS]

The loop: ClaimJob (the lease; renewed before every call), FetchWeights (the job's latest
version: a restarted learner resumes there), then per update TakeBatch → the PPO actor-critic
update (decoupled GAE, truncated importance sampling, clipped critic; R3 routing replay) →
ReportStep → PublishWeights, until the job's step budget. Settings come from the job's
spec.learner with t1's defaults; those this reference does not implement are refused at start.
"""

import argparse
import hashlib
import math
import sys
import time

import grpc
import torch

from .contract import TrainerStub, enum_value, message
from .ppo import decoupled_gae, load_balancing_loss, minibatch_order, mix_seed, ppo_loss, trajectory_rows, whiten
from .qwen3_moe import CRITIC
from .tinymoe import TinyMoE

CHUNK = 1 << 20
# Norm gains (input/post-attention layernorms, q_norm, k_norm, the final norm) take no weight
# decay (model/moe/params.ts); the rest of the actor 0.01.
NO_DECAY = "norm.weight"
WEIGHT_DECAY = 0.01
AUX_LOSS_COEF = 0.01


def settings(spec):
    """The job's learner settings with t1's defaults (actors/learner/job-spec.ts); refuses those
    this reference does not implement."""
    l = spec.learner  # noqa: E741 - the spec's own name
    unsupported = []
    if l.advantage_mode not in (0, enum_value("t1.v1.AdvantageMode", "ADVANTAGE_MODE_CRITIC")):
        unsupported.append("advantage_mode (only ADVANTAGE_MODE_CRITIC)")
    if l.lr_schedule not in (0, enum_value("t1.v1.LrSchedule", "LR_SCHEDULE_CONSTANT")):
        unsupported.append("lr_schedule (only constant)")
    if l.loss_aggregation not in (0, enum_value("t1.v1.LossAggregation", "LOSS_AGGREGATION_TOKEN")):
        unsupported.append("loss_aggregation (only token)")
    if l.HasField("tito") and not l.tito:
        unsupported.append("tito = false (this learner trains on the sampled ids only)")
    if l.lr_warmup_steps > 0:
        unsupported.append("lr_warmup_steps")
    if l.HasField("drop_zero_variance_groups") and l.drop_zero_variance_groups:
        unsupported.append("drop_zero_variance_groups")
    if unsupported:
        raise SystemExit("t1 reference learner: not implemented: " + ", ".join(unsupported))
    clip = l.clip_eps or 0
    tis = l.tis_threshold if l.HasField("tis_threshold") else 2.0
    lr = l.lr or 3e-4
    return {
        "lr": lr,
        "critic_lr": l.critic_lr or lr,
        "gamma": l.gamma if l.gamma > 0 else 1.0,
        "actor_lambda": l.actor_lambda or 0.95,
        "critic_lambda": l.critic_lambda or 1.0,
        "clip_low": clip or 0.2,
        "clip_high": clip or 0.28,
        "value_clip": (l.value_clip_eps or 0.2),
        "value_coef": 0.5,
        "entropy_coef": l.entropy_coef or 0.001,
        "tis": tis if tis > 0 else None,
        "temperature": spec.sampling.temperature or 1.0,
        "max_grad_norm": l.max_grad_norm or 1.0,
        "epochs": l.ppo_epochs or 2,
        "minibatches": l.minibatches or 2,
        "batch": l.batch_trajectories or 16,
        "warmup": l.critic_warmup_steps if l.HasField("critic_warmup_steps") else 0,
        "steps": l.ppo_steps,
        "replay": l.r3 if l.HasField("r3") else True,
        "normalize": l.normalize_advantages if l.HasField("normalize_advantages") else True,
        "center": l.center_advantages if l.HasField("center_advantages") else True,
        "publish_every": l.publish_every_steps or 1,
        "seed": spec.seed & 0xFFFFFFFF,
        "aux_loss_coef": AUX_LOSS_COEF,
    }


class Trainer:
    """The gateway side of the loop: the lease, renewed before each call."""

    def __init__(self, stub, job, trainer_id, ttl_ms):
        self.stub, self.job, self.trainer_id, self.ttl_ms = stub, job, trainer_id, ttl_ms
        self.claim = None

    def renew(self):
        self.claim = self.stub.ClaimJob(
            message("t1.v1.ClaimJobRequest")(job_id=self.job, trainer_id=self.trainer_id, lease_ttl_ms=self.ttl_ms)
        )
        return self.claim

    @property
    def lease(self):
        return self.claim.lease.lease_id

    def fetch(self):
        self.renew()
        parts, head = [], None
        for chunk in self.stub.FetchWeights(message("t1.v1.FetchWeightsRequest")(job_id=self.job, lease_id=self.lease)):
            head = head or chunk
            parts.append(chunk.data)
        data = b"".join(parts)
        if hashlib.sha256(data).hexdigest() != head.sha256:
            raise RuntimeError("FetchWeights: the bytes do not match their sha256")
        return data, head.policy_version

    def take(self, ack, size):
        while True:
            self.renew()
            batch = self.stub.TakeBatch(
                message("t1.v1.TrainerServiceTakeBatchRequest")(
                    job_id=self.job, lease_id=self.lease, ack_batch_id=ack, max_trajectories=size, wait_ms=5000
                )
            ).batch
            if len(batch.trajectories) + len(batch.trajectory_refs) > 0:
                return self.resolve(batch)
            ack = ""  # an empty answer confirms nothing

    def resolve(self, batch):
        """Trajectories too large for the batch's message come as references: fetch each one and
        append it, in order (batch.weights covers `trajectories` then `trajectory_refs`)."""
        Trajectory = message("t1.v1.Trajectory")
        for ref in batch.trajectory_refs:
            parts, head = [], None
            request = message("t1.v1.FetchTrajectoryRequest")(job_id=self.job, lease_id=self.lease, ref=ref)
            for chunk in self.stub.FetchTrajectory(request):
                head = head or chunk
                parts.append(chunk.data)
            data = b"".join(parts)
            if len(data) != head.size_bytes or hashlib.sha256(data).hexdigest() != head.sha256:
                raise RuntimeError(f"FetchTrajectory {ref.name}: the bytes do not match their size and sha256")
            batch.trajectories.append(Trajectory.FromString(data))
        del batch.trajectory_refs[:]
        return batch

    def report(self, fields):
        self.renew()
        report = message("t1.v1.TrainStepReport")(job_id=self.job, **fields)
        self.stub.ReportStep(message("t1.v1.ReportStepRequest")(job_id=self.job, lease_id=self.lease, report=report))

    def publish(self, data, version, step, batch_ids):
        self.renew()
        header = message("t1.v1.PublishWeightsHeader")(
            job_id=self.job,
            lease_id=self.lease,
            policy_version=version,
            step=step,
            format="safetensors",
            size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            batch_ids=batch_ids,
        )
        Request = message("t1.v1.PublishWeightsRequest")

        def parts():
            yield Request(header=header)
            for at in range(0, len(data), CHUNK):
                yield Request(data=data[at : at + CHUNK])

        return self.stub.PublishWeights(parts())


def loss_weights(batch):
    """One loss weight per trajectory, in batch order: 1 unless the buffer down-weighted it."""
    if len(batch.weights) == 0:
        return [1.0] * len(batch.trajectories)
    if len(batch.weights) != len(batch.trajectories) or any(not (w >= 0 and math.isfinite(w)) for w in batch.weights):
        raise RuntimeError(f"batch {batch.batch_id}: weights {list(batch.weights)} do not give one finite weight >= 0 per trajectory")
    return list(batch.weights)


def optimisers_for(model, cfg):
    """AdamW for the actor (every parameter but the value head; no weight decay on the norm
    gains) and for the critic (the value head, no decay), as t1's learner builds them."""
    params = dict(model.named_parameters())
    actor = [(n, q) for n, q in params.items() if n not in CRITIC]
    decays = [q for n, q in actor if not n.endswith(NO_DECAY)]
    plain = [q for n, q in actor if n.endswith(NO_DECAY)]
    return {
        "actor": torch.optim.AdamW(
            [{"params": decays, "weight_decay": WEIGHT_DECAY}, {"params": plain, "weight_decay": 0.0}],
            lr=cfg["lr"],
            eps=1e-8,
        ),
        "critic": torch.optim.AdamW([params[n] for n in CRITIC], lr=cfg["critic_lr"], weight_decay=0.0, eps=1e-8),
    }


def update(model, optimisers, rows, cfg, phase, step_index):
    """One update over a batch's rows, as actors/learner/trainer.ts takes it: proximal log-probs
    and old values once, GAE, whitened advantages, then epochs of minibatch steps in t1's seeded
    order. `phase`: "critic_warmup" (the critic alone learns) or "ppo". `step_index`: updates
    taken before this one (seeds the minibatch order). Returns the step's statistics."""
    replay = cfg["replay"]
    ppo = phase == "ppo"
    # 1. The learner's log-probs and values at the start of the update (no gradient).
    diffs = []
    with torch.no_grad():
        for row in rows:
            logits, values, _, _ = model(row["inputs"], replay=row["replay"] if replay else None)
            logsm = torch.log_softmax(logits.double() / cfg["temperature"], dim=-1)
            row["prox"] = logsm.gather(-1, row["targets"][:, None])[:, 0]
            row["old_values"] = values.double()
            action = row["action"] != 0
            behaviour = row["behaviour"].clone()
            nan = torch.isnan(behaviour)
            behaviour[nan] = row["prox"][nan]
            row["behaviour"] = behaviour
            if action.any():
                diffs.append(float((row["prox"] - behaviour)[action].abs().mean()))
            adv, ret = decoupled_gae(row["rewards"], row["old_values"], cfg["gamma"], cfg["actor_lambda"], cfg["critic_lambda"])
            row["advantages"], row["returns"] = adv, ret
    # 2. Advantages whitened over the batch's generated tokens.
    if cfg["normalize"]:
        adv = whiten(torch.cat([r["advantages"] for r in rows]), torch.cat([r["action"] for r in rows]), cfg["center"])
        at = 0
        for r in rows:
            n = r["advantages"].numel()
            r["advantages"] = adv[at : at + n]
            at += n
    # The buffer's per-trajectory loss weight (below 1 for a trajectory served past its staleness
    # bound), applied after whitening as t1's learner applies it.
    for r in rows:
        r["advantages"] = r["advantages"] * r["weight"]
    # 3. Epochs of minibatch steps. The critic shares the trunk: one gradient norm over every
    # parameter clips both optimisers (the critic's alone during its warm-up, when only it steps).
    totals = {"tokens": 0, "rows": 0, "policy": 0.0, "value": 0.0, "entropy": 0.0, "clipped": 0, "tis_clipped": 0, "kl": 0.0}
    norms = []
    critic = list(model.value_head.parameters())
    everything = list(model.parameters())
    for epoch in range(max(1, cfg["epochs"])):
        for part in minibatch_order(len(rows), max(1, cfg["minibatches"]), mix_seed(cfg["seed"], step_index, epoch)):
            mb = [rows[i] for i in part]
            normalizer = max(1, sum(int(r["action"].sum()) for r in mb))
            value_normalizer = max(1, sum(r["targets"].numel() for r in mb))
            model.zero_grad(set_to_none=True)
            seen, finite = [], True
            for row in mb:
                logits, values, used, router = model(row["inputs"], replay=row["replay"] if replay else None)
                loss, stats = ppo_loss(logits, values, row, cfg, normalizer, value_normalizer, 1.0 if ppo else 0.0)
                loss = loss + cfg["aux_loss_coef"] * load_balancing_loss(router, used)
                if not torch.isfinite(loss):
                    finite = False  # t1's learner leaves such a minibatch out, nothing changed
                    break
                loss.backward()
                seen.append(stats)
            grads = [q.grad for q in (everything if ppo else critic) if q.grad is not None]
            norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.double()) for g in grads]))) if grads else 0.0
            if not finite or not math.isfinite(norm):
                model.zero_grad(set_to_none=True)
                continue
            scale = cfg["max_grad_norm"] / norm if cfg["max_grad_norm"] > 0 and norm > cfg["max_grad_norm"] else 1.0
            for q in everything:
                if q.grad is not None:
                    q.grad.mul_(scale)
            if ppo:
                optimisers["actor"].step()
            optimisers["critic"].step()
            norms.append(norm)
            for stats in seen:
                for key in totals:
                    totals[key] += stats[key]
    k = max(1, totals["tokens"])
    return {
        "policy_loss": totals["policy"] / k,
        "value_loss": totals["value"] / max(1, totals["rows"]),
        "entropy": totals["entropy"] / k,
        "clipfrac": totals["clipped"] / k,
        "tis_clipfrac": totals["tis_clipped"] / k,
        "approx_kl": totals["kl"] / k,
        "grad_norm": sum(norms) / len(norms) if norms else 0.0,
        "train_infer_logprob_abs_diff": sum(diffs) / len(diffs) if diffs else 0.0,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gateway", required=True, help="host:port of a t1 gateway")
    p.add_argument("--job", required=True, help="a train job submitted with learner.external = true")
    p.add_argument("--trainer-id", default="t1-torch-reference")
    p.add_argument("--token", default=None, help="bearer token (admin role)")
    p.add_argument("--lease-ttl-ms", type=int, default=30000)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    # --- claim the job, start from its latest published version -------------------------------
    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    stub = TrainerStub(grpc.insecure_channel(a.gateway, options=options), token=a.token)
    trainer = Trainer(stub, a.job, a.trainer_id, a.lease_ttl_ms)
    claim = trainer.renew()
    cfg = settings(claim.spec)
    data, version = trainer.fetch()
    model, _ = TinyMoE.from_bytes(data)
    step = int(claim.step)
    budget = cfg["warmup"] + cfg["steps"] if cfg["steps"] > 0 else math.inf
    print(f"t1 reference learner: job {a.job}, lease {trainer.lease}, from v{version} at step {step}", flush=True)

    # --- separate optimisers for the actor and the critic head, as t1's learner --------------
    optimisers = optimisers_for(model, cfg)

    # --- the loop: take, train, report, publish ------------------------------------------------
    ack, trained = "", []
    while step < budget:
        batch = trainer.take(ack, cfg["batch"])
        started = time.monotonic()
        vocab = model.vocab_size
        rows = [(trajectory_rows(t, vocab), w) for t, w in zip(batch.trajectories, loss_weights(batch))]
        rows = [dict(r, weight=w) for r, w in rows if r is not None]
        phase = "critic_warmup" if step < cfg["warmup"] else "ppo"
        # Nothing to train on: a skipped step (the version still advances, as t1's learner does,
        # so the coordinator admits new episodes in place of the consumed ones).
        skipped = sum(int(r["action"].sum()) for r in rows) == 0
        stats = {"grad_norm": 0.0} if skipped else update(model, optimisers, rows, cfg, phase, step)
        step += 1
        version += 1
        trained.append(batch.batch_id)
        rewards = [r["reward"] for r in rows]
        tokens = sum(r["targets"].numel() + 1 for r in rows)
        seconds = time.monotonic() - started
        trainer.report(
            {
                "step": step,
                "policy_version": version,
                "phase": enum_value("t1.v1.TrainPhase", f"TRAIN_PHASE_{phase.upper()}"),
                "skipped": skipped,
                "skip_reason": "no_trainable_tokens" if skipped else "",
                "metrics": {"grad_norm": stats.pop("grad_norm")},
                "batch_id": batch.batch_id,
                "episode_ids": [r["episode_id"] for r in rows],
                "trajectories": len(rows),
                "tokens": tokens,
                "reward_mean": sum(rewards) / max(1, len(rewards)),
                "resolved_rate": sum(1 for r in rows if r["resolved"]) / max(1, len(rows)),
                "staleness_mean": batch.staleness_mean,
                "tokens_per_second": tokens / max(seconds, 1e-9),
                "duration_ms": int(seconds * 1000),
                **stats,
            }
        )
        if step % cfg["publish_every"] == 0 or step >= budget:
            trainer.publish(model.to_bytes(version, {"job": a.job, "step": str(step)}), version, step, trained)
            trained = []
        ack = batch.batch_id
        print(f"step {step}: v{version}, {len(rows)} trajectories, policy {stats.get('policy_loss', 0.0):.4f}, value {stats.get('value_loss', 0.0):.4f}", flush=True)
    print(f"t1 reference learner: job {a.job} trained to step {step}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
