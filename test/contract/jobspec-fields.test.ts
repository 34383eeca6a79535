import { readFileSync } from "node:fs"
import { join } from "node:path"
import { create, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import { JobKind, JobSpecSchema } from "../../proto/index.ts"
import { validateJobSpec } from "../../services/gateway/validate.ts"

/**
 * No silent settings: every JobSpec field, down to the fields of its sampling, limits and
 * learner messages, is either honoured — named here with the tests that show its effect, each of
 * which must exist under that exact title — or refused by the gateway whenever it is set. A
 * field added to the contract fails this test until it is one or the other.
 */
type Shown = ReadonlyArray<readonly [file: string, title: string]>
type Coverage =
  | { readonly shown: Shown }
  | {
      readonly refused: MessageInitShape<typeof JobSpecSchema>
      readonly reason: string
    }

const COORDINATOR = "actors/coordinator/coordinator.contract.ts"
const LEDGER = "actors/coordinator/ledger.test.ts"
const PLAN = "actors/coordinator/plan.test.ts"
const JOB_SPEC = "actors/learner/job-spec.test.ts"
const TRAINER = "actors/learner/trainer.test.ts"
const LIMITS = "actors/sampler/limits.test.ts"
const E2E = "test/e2e/jobs.e2e.test.ts"

const EVAL_RUN = [
  COORDINATOR,
  "runs an eval job end to end: retries, duplicate ends, resolved rate and pass@k",
] as const
const TRAIN_RUN = [
  COORDINATOR,
  "admits training episodes within the staleness bound while a fake learner advances",
] as const
const MAPPED = [JOB_SPEC, "takes the spec's hyperparameters, ablations and step budget"] as const
const MAPPED_ALL = [JOB_SPEC, "takes every PPO, advantage, schedule and warm-start field"] as const
const SAMPLING = [
  LIMITS,
  "temperature, top_p, top_k, max_tokens, stop_token_ids and seed reach the policy",
] as const
const SCHEDULE = [
  TRAINER,
  "follows the learning-rate schedule over PPO updates (critic warm-up at the base critic lr)",
] as const
const CLIPS = [
  TRAINER,
  "scores the proximal policy once: epoch 1 is on-policy, later epochs clip the ratio and the values",
] as const
const STEPS = [
  TRAINER,
  "takes ppo_epochs × minibatches optimiser steps on seeded shuffles (at most one per sequence)",
] as const
const LRS = [TRAINER, "steps the actor at lr and the value head at critic_lr"] as const
const AGGREGATION = [
  TRAINER,
  "whitening re-centres only in critic mode by default: a group's long failure keeps its push, unless the loss weighs sequences alike",
] as const
const ADMISSION = [
  LEDGER,
  "never exceeds max_concurrent nor (η + step + 1) · batch admitted, with a learner advancing versions",
] as const

const COVERAGE: Record<string, Coverage> = {
  name: {
    shown: [
      [
        "cli/commands/jobs.test.ts",
        "submits a job file, lists it, watches it to the end and cancels another",
      ],
    ],
  },
  kind: { shown: [EVAL_RUN, TRAIN_RUN] },
  task_set: {
    shown: [
      [COORDINATOR, "fails a job whose spec cannot run, with the reason"],
      [
        E2E,
        "runs an eval job: admitted, every episode's reward, resolved rate and pass@k, SUCCEEDED",
      ],
    ],
  },
  task_ids: { shown: [[PLAN, "task_ids: exactly those, in the listed order, whatever the split"]] },
  split: {
    shown: [[PLAN, "split: only that split's tasks, in key order; unspecified: all of them"]],
  },
  policy_ref: {
    shown: [
      EVAL_RUN,
      [
        "actors/sampler/policy/job-policies.test.ts",
        "gives each job its own weights: a train job's published version, an eval job's policy_ref",
      ],
    ],
  },
  "sampling.temperature": { shown: [SAMPLING, MAPPED] },
  "sampling.top_p": { shown: [SAMPLING] },
  "sampling.max_tokens": { shown: [SAMPLING] },
  "sampling.stop_token_ids": { shown: [SAMPLING] },
  "sampling.seed": { shown: [SAMPLING, EVAL_RUN] },
  "sampling.top_k": { shown: [SAMPLING] },
  "limits.max_turns": { shown: [[LIMITS, "max_turns: the agent gets exactly that many turns"]] },
  "limits.max_tokens": {
    shown: [[LIMITS, "max_tokens: the context budget ends the episode before the turns run out"]],
  },
  "limits.wall_clock_sec": {
    shown: [[LIMITS, "wall_clock_sec: slow commands end the episode on the clock"]],
  },
  "limits.observation_max_bytes": {
    shown: [
      [
        LIMITS,
        "observation_max_bytes: the sandbox returns at most 4× it, the agent reads at most it",
      ],
    ],
  },
  "limits.observation_max_tokens": {
    shown: [[LIMITS, "observation_max_tokens: an observation is cut to that many tokens"]],
  },
  "limits.command_timeout_ms": {
    shown: [[LIMITS, "command_timeout_ms: each command runs with that timeout"]],
  },
  "limits.blind_observations": {
    shown: [
      [LIMITS, "blind_observations: the commands run, the policy reads nothing they printed"],
    ],
  },
  samples_per_task: {
    shown: [
      EVAL_RUN,
      [LEDGER, "covers every (task, sample) of a round exactly once, in a seeded order per round"],
    ],
  },
  "learner.clip_eps": { shown: [MAPPED, CLIPS] },
  "learner.value_clip_eps": { shown: [MAPPED, CLIPS] },
  "learner.entropy_coef": {
    shown: [
      MAPPED,
      [
        "actors/learner/ppo/loss.test.ts",
        "T = 1.3, large entropy weight, value loss on action rows only, given normalizers",
      ],
    ],
  },
  "learner.gamma": {
    shown: [
      MAPPED,
      [
        "actors/learner/ppo/gae.test.ts",
        "matches a hand-computed trajectory with two observation rows in the middle",
      ],
    ],
  },
  "learner.actor_lambda": {
    shown: [
      MAPPED,
      [
        "actors/learner/ppo/advantages.test.ts",
        "critic: GAE with the actor λ, returns with the critic λ (hand-computed)",
      ],
    ],
  },
  "learner.critic_lambda": {
    shown: [
      MAPPED_ALL,
      [TRAINER, "trains the critic on critic_lambda returns (hand-checked value loss)"],
    ],
  },
  "learner.lr": { shown: [MAPPED, LRS] },
  "learner.critic_lr": { shown: [MAPPED_ALL, LRS] },
  "learner.critic_warmup_steps": {
    shown: [
      TRAIN_RUN,
      [
        JOB_SPEC,
        "counts the default critic warm-up in the step budget unless the spec sets it (0 included)",
      ],
      [
        TRAINER,
        "critic warm-up moves only the value head; the policy starts changing at the switch",
      ],
    ],
  },
  "learner.max_staleness": { shown: [ADMISSION, TRAIN_RUN] },
  "learner.r3": {
    shown: [
      MAPPED,
      [TRAINER, "r3 on: the learner's forward replays the recorded routing; off: it routes itself"],
    ],
  },
  "learner.tito": {
    shown: [
      MAPPED,
      [
        TRAINER,
        "off: trains on the conversation re-tokenised from text, the sampler's log-probs kept only where the ids survived",
      ],
    ],
  },
  "learner.tis_threshold": {
    shown: [
      [
        JOB_SPEC,
        "tis_threshold: unset keeps the default cap, 0 turns truncated importance sampling off",
      ],
      [
        "actors/learner/ppo/loss.test.ts",
        "T = 0.7 with TIS (threshold 2) and an unclipped value loss",
      ],
    ],
  },
  "learner.sft_steps": {
    shown: [
      MAPPED_ALL,
      [
        "actors/learner/learner.test.ts",
        "runs sft_steps on the golden set before its first announcement, then publishes every publish_every_steps",
      ],
    ],
  },
  "learner.ppo_steps": {
    shown: [
      TRAIN_RUN,
      [
        E2E,
        "trains: learner steps arrive as events, new weights reach the sampler, SUCCEEDED at the step budget",
      ],
    ],
  },
  "learner.batch_trajectories": { shown: [ADMISSION, TRAIN_RUN] },
  "learner.ppo_epochs": { shown: [MAPPED_ALL, STEPS] },
  "learner.minibatches": { shown: [MAPPED_ALL, STEPS] },
  "learner.max_grad_norm": {
    shown: [
      MAPPED,
      [TRAINER, "clips the gradient to max_grad_norm before the optimiser step (0: no clipping)"],
    ],
  },
  "learner.publish_every_steps": {
    shown: [
      MAPPED_ALL,
      [
        "actors/learner/learner.test.ts",
        "runs sft_steps on the golden set before its first announcement, then publishes every publish_every_steps",
      ],
    ],
  },
  "learner.eval_every_steps": {
    refused: { kind: JobKind.TRAIN, taskSet: "tasks/x", learner: { evalEverySteps: 5 } },
    reason: "periodic evaluation during training is not run",
  },
  "learner.advantage_mode": {
    shown: [
      MAPPED_ALL,
      [TRAINER, "group baseline and staleness weights: the policy loss of a hand-built batch"],
    ],
  },
  "learner.normalize_advantages": {
    shown: [
      MAPPED_ALL,
      [
        "actors/learner/ppo/advantages.test.ts",
        "whitens over the whole batch's generated tokens to mean 0 and std 1",
      ],
    ],
  },
  "learner.drop_zero_variance_groups": {
    shown: [
      MAPPED_ALL,
      [
        TRAINER,
        "keeps zero-variance groups when the filter is off, and never drops in critic mode by default",
      ],
    ],
  },
  "learner.lr_schedule": { shown: [MAPPED_ALL, SCHEDULE] },
  "learner.lr_warmup_steps": { shown: [MAPPED_ALL, SCHEDULE] },
  "learner.lr_decay_steps": { shown: [MAPPED_ALL, SCHEDULE] },
  "learner.min_lr_ratio": { shown: [MAPPED_ALL, SCHEDULE] },
  "learner.sft_lr": {
    shown: [
      MAPPED_ALL,
      [
        TRAINER,
        "SFT steps the actor at sft_lr, leaves the critic alone and does not count as an RL step",
      ],
    ],
  },
  "learner.center_advantages": { shown: [MAPPED_ALL, AGGREGATION] },
  "learner.loss_aggregation": { shown: [MAPPED_ALL, AGGREGATION] },
  "learner.external": {
    shown: [
      [
        "test/integration/trainer-api.test.ts",
        "claim, fetch, take, publish, report for 3 updates; leases, resume, stale acks and malformed weights",
      ],
      [
        "services/gateway/validate.test.ts",
        "learner.external: train jobs only, without the SFT warm start t1's learner runs",
      ],
      [
        "test/e2e/python-learner.e2e.test.ts",
        "3 updates; killed after the first and restarted, it resumes from the last published version; the audit holds",
      ],
    ],
  },
  max_concurrent_episodes: { shown: [ADMISSION] },
  labels: {
    shown: [
      [
        "services/jobs/store.contract.ts",
        "keeps the spec's labels with the job: get and list return them",
      ],
    ],
  },
  max_episode_attempts: {
    shown: [
      [
        LEDGER,
        "re-issues an infra-failed attempt as attempt + 1 and counts the episode failed after the last",
      ],
    ],
  },
  eval_task_set: {
    refused: { kind: JobKind.EVAL, taskSet: "tasks/x", evalTaskSet: "tasks/y" },
    reason: "periodic evaluation during training is not run",
  },
  seed: {
    shown: [
      MAPPED_ALL,
      STEPS,
      [LEDGER, "covers every (task, sample) of a round exactly once, in a seeded order per round"],
    ],
  },
}

/** Field paths under JobSpec: message fields are walked into, every other field is a leaf. */
const leaves = (message: DescMessage, prefix = ""): string[] =>
  message.fields.flatMap((f) =>
    f.fieldKind === "message" ? leaves(f.message, `${prefix}${f.name}.`) : [`${prefix}${f.name}`],
  )

const ROOT = join(import.meta.dirname, "..", "..")
const sources = new Map<string, string>()
const source = (file: string) => {
  let text = sources.get(file)
  if (text === undefined) {
    text = readFileSync(join(ROOT, file), "utf8")
    sources.set(file, text)
  }
  return text
}

describe("every JobSpec field is honoured or refused", () => {
  const fields = leaves(JobSpecSchema)

  it("the coverage names exactly the contract's fields", () => {
    expect(fields.length).toBeGreaterThan(50)
    expect([...fields].sort()).toEqual(Object.keys(COVERAGE).sort())
  })

  it.each(fields)("spec.%s", (field) => {
    const c = COVERAGE[field]
    if (c === undefined) throw new Error(`spec.${field} is neither shown nor refused`)
    if ("shown" in c) {
      expect(c.shown.length).toBeGreaterThan(0)
      for (const [file, title] of c.shown)
        expect(source(file), `${file} has no test "${title}"`).toContain(JSON.stringify(title))
    } else {
      const violations = validateJobSpec(create(JobSpecSchema, c.refused))
      const hit = violations.find((v) => v.fieldPath === `spec.${field}`)
      expect(hit, JSON.stringify(violations)).toBeDefined()
      expect(hit?.reason).toContain(c.reason)
    }
  })
})
