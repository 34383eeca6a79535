import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { create } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { CHAT_SPECIAL_TOKENS, ChatTemplate, trainTokenizer } from "../../model/index.ts"
import {
  type EpisodeEnd,
  EpisodePurpose,
  type EpisodeWorkItem,
  EpisodeWorkItemSchema,
  ErrorCode,
  ExecResultSchema,
  TaskSchema,
  TerminationReason,
  TestOutcome,
  type VerifierResult,
  VerifierResultSchema,
} from "../../proto/index.ts"
import { shellBlock } from "./actions/index.ts"
import { endLine } from "./actor.ts"
import {
  EpisodeInfraError,
  EpisodePorts,
  type EpisodePortsShape,
  inlineSetup,
  runEpisode,
} from "./episode.ts"
import { PolicyBackend } from "./policy/backend.ts"
import { scriptedPolicy } from "./policy/scripted.ts"

const tokenizer = trainTokenizer(["```bash\nls -la\n```\n<|done|> the tests need numpy"], {
  vocabSize: 300,
  specialTokens: [...CHAT_SPECIAL_TOKENS, "<|done|>"],
})

const item = create(EpisodeWorkItemSchema, {
  jobId: "job-u",
  episodeId: "ep-1",
  attempt: 0,
  taskRef: { taskSet: "set", taskId: "needs-numpy" },
  task: { id: "needs-numpy", taskSet: "set", instruction: "Make the tests pass." },
  sampling: { temperature: 1, topP: 1, maxTokens: 64, seed: 1n },
  limits: { maxTurns: 4, wallClockSec: 60, commandTimeoutMs: 1000, observationMaxBytes: 1024 },
  purpose: EpisodePurpose.TRAIN,
  groupId: "g",
  groupSize: 1,
  admittedUnixMs: BigInt(Date.now()),
})

/** Ports without a bus: a sandbox that answers every command, and the given verifier reply. */
const ports = (verdict: VerifierResult, published: EpisodeEnd[]): EpisodePortsShape => ({
  createSandbox: () => Effect.succeed("sb-1"),
  exec: () => Effect.succeed(create(ExecResultSchema, { output: new Uint8Array(), exitCode: 0 })),
  putFiles: () => Effect.void,
  destroySandbox: () => Effect.void,
  verify: () => Effect.succeed(verdict),
  template: new ChatTemplate(tokenizer),
  format: shellBlock,
  publish: () => Effect.succeed(1),
  publishEnd: (end) => Effect.sync(() => void published.push(end)),
})

const policy = scriptedPolicy(tokenizer, () => ["```bash\nls -la\n```", "<|done|>"])

/** Runs `item` with these ports and the scripted policy provided as its services. */
const runWith = (p: EpisodePortsShape, item: EpisodeWorkItem) =>
  Effect.runPromise(
    runEpisode(item, 0).pipe(
      Effect.provideService(EpisodePorts, p),
      Effect.provideService(PolicyBackend, policy),
    ),
  )

const run = async (verdict: VerifierResult) => {
  const published: EpisodeEnd[] = []
  const end = await runWith(ports(verdict, published), item)
  expect(published).toEqual([end])
  return end
}

describe("runEpisode: the verifier's outcome in the end record", () => {
  it("a scored result is the episode's reward and tests", async () => {
    const end = await run(
      create(VerifierResultSchema, {
        tests: [{ name: "test_a", outcome: TestOutcome.PASSED }],
        passed: 1,
        total: 1,
        reward: 1,
        resolved: true,
      }),
    )
    expect(end.termination).toBe(TerminationReason.COMPLETED)
    expect({
      reward: end.reward,
      resolved: end.resolved,
      tests: end.tests.length,
      unverifiable: end.unverifiable,
      infraFailed: end.infraFailed,
      error: end.error,
    }).toEqual({
      reward: 1,
      resolved: true,
      tests: 1,
      unverifiable: false,
      infraFailed: false,
      error: undefined,
    })
  })

  it("a forged result is scored at reward 0: tests kept for diagnosis, forged, not infra", async () => {
    const end = await run(
      create(VerifierResultSchema, {
        forged: true,
        forgeryEvidence: ["canary test_rows_1a2b3c.py::test_keys_4d5e6f must fail but passed"],
        tests: [{ name: "test_a", outcome: TestOutcome.PASSED }],
        // A reply that left counts above 0 still scores nothing.
        passed: 1,
        total: 1,
        reward: 1,
        resolved: true,
      }),
    )
    expect(end.termination).toBe(TerminationReason.COMPLETED)
    expect({
      forged: end.forged,
      reward: end.reward,
      resolved: end.resolved,
      tests: end.tests.map((t) => t.name),
      passed: end.testsPassed,
      total: end.testsTotal,
      unverifiable: end.unverifiable,
      infraFailed: end.infraFailed,
      error: end.error,
    }).toEqual({
      forged: true,
      reward: 0,
      resolved: false,
      tests: ["test_a"],
      passed: 0,
      total: 1,
      unverifiable: false,
      infraFailed: false,
      error: undefined,
    })
  })

  it("an unverifiable result ends the episode unverifiable: no score, not infra, not retryable", async () => {
    const end = await run(
      create(VerifierResultSchema, {
        unverifiable: true,
        missingPackages: ["numpy"],
        // Whatever else the reply carries is not a score.
        tests: [{ name: "test_a", outcome: TestOutcome.ERROR }],
        passed: 0,
        total: 1,
        reward: 0,
        error: {
          code: ErrorCode.FAILED_PRECONDITION,
          message: "the tests need packages the sandbox lacks: numpy",
        },
      }),
    )
    // The agent's own termination is kept: the verification, not the agent, had no outcome.
    expect(end.termination).toBe(TerminationReason.COMPLETED)
    expect({
      unverifiable: end.unverifiable,
      missing: end.missingPackages,
      infraFailed: end.infraFailed,
      reward: end.reward,
      resolved: end.resolved,
      tests: end.tests,
      passed: end.testsPassed,
      total: end.testsTotal,
      code: end.error?.code,
      retryable: end.error?.retryable,
      message: end.error?.message,
    }).toEqual({
      unverifiable: true,
      missing: ["numpy"],
      infraFailed: false,
      reward: 0,
      resolved: false,
      tests: [],
      passed: 0,
      total: 0,
      code: ErrorCode.FAILED_PRECONDITION,
      retryable: false,
      message: "unverifiable: the tests need packages the sandbox lacks: numpy",
    })
    expect(endLine(end, 0)).toBe(
      "sampler: episode ep-1 (attempt 0) completed after 2 turns, not scored: unverifiable: the tests need packages the sandbox lacks: numpy",
    )
  })

  it("names the missing packages itself when the verifier sent no message", async () => {
    const end = await run(
      create(VerifierResultSchema, { unverifiable: true, missingPackages: ["numpy", "requests"] }),
    )
    expect(end.error?.message).toBe(
      "unverifiable: the tests need packages the sandbox lacks: numpy, requests",
    )
  })

  it("an infra-failed verification stays an infra failure (retried), never unverifiable", async () => {
    const end = await run(
      create(VerifierResultSchema, {
        infraFailed: true,
        error: { code: ErrorCode.UNAVAILABLE, message: "sandbox gone", retryable: true },
      }),
    )
    expect(end.termination).toBe(TerminationReason.INFRA_FAILURE)
    expect([end.infraFailed, end.unverifiable, end.error?.retryable]).toEqual([true, false, true])
    expect(endLine(end, 3)).toBe(
      "sampler: episode ep-1 (attempt 3) infra_failure after 2 turns, reward 0: verify: sandbox gone",
    )
  })
})

describe("runEpisode: the setup script", () => {
  const scored = create(VerifierResultSchema, { passed: 1, total: 1, reward: 1, resolved: true })
  const withScript = (setupScript: string) =>
    create(EpisodeWorkItemSchema, {
      ...item,
      task: create(TaskSchema, {
        id: "needs-numpy",
        taskSet: "set",
        instruction: "Make the tests pass.",
        workdir: "/app",
        setupScript,
      }),
    })
  const withSetup = withScript("touch a.txt\n")
  // Over MAX_INLINE_SETUP_BYTES: uploaded, not inline.
  const withBigSetup = withScript(`touch a.txt\n${"# padding\n".repeat(4000)}`)
  const setupRun = async (refuseTmp: boolean, work = withBigSetup) => {
    const puts: string[] = []
    const execs: string[] = []
    const published: EpisodeEnd[] = []
    const p: EpisodePortsShape = {
      ...ports(scored, published),
      putFiles: (_id, path) =>
        refuseTmp && path.startsWith("/tmp/")
          ? Effect.fail(new EpisodeInfraError({ stage: "put", message: "outside the workdir" }))
          : Effect.sync(() => void puts.push(path)),
      exec: (_id, command) =>
        Effect.sync(() => {
          execs.push(command)
          return create(ExecResultSchema, { output: new Uint8Array(), exitCode: 0 })
        }),
    }
    const end = await runWith(p, work)
    return { end, puts, setup: execs[0] }
  }

  it("a small script runs inline in the episode's shell: nothing uploaded", async () => {
    const { end, puts, setup } = await setupRun(false, withSetup)
    expect(puts).toEqual([])
    expect(setup).toBe("bash -c 'touch a.txt\n' setup.sh")
    expect(end.resolved).toBe(true)
  })

  it("inline runs what the script file would: quotes, variables, heredocs, exit status", () => {
    const script = [
      "set -e",
      `name='it'"'"'s'; echo "$name" "$0" > out.txt`,
      "cat >> out.txt <<'EOF'",
      "$HOME stays literal, 'quotes' too",
      "EOF",
      'printf "%s\\n" "tab\there" >> out.txt',
      "exit 3",
    ].join("\n")
    const dir = mkdtempSync(join(tmpdir(), "t1-setup-"))
    try {
      writeFileSync(join(dir, "setup.sh"), script)
      const asFile = spawnSync("bash", ["-c", "bash ./setup.sh; echo rc=$?; cat out.txt"], {
        cwd: dir,
        encoding: "utf8",
      })
      const command = inlineSetup(script)
      expect(command).toBeDefined()
      const inline = spawnSync("bash", ["-c", `${command}; echo rc=$?; cat out.txt`], {
        cwd: dir,
        encoding: "utf8",
      })
      // $0 names the script either way (./setup.sh run as a file, setup.sh inline)
      expect(inline.stdout).toBe(asFile.stdout.replace("./setup.sh", "setup.sh"))
      expect(inline.stdout).toMatch(/^rc=3\nit's setup.sh\n\$HOME stays literal, 'quotes' too\n/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    expect(inlineSetup("a\0b")).toBeUndefined()
    expect(inlineSetup("#".repeat(40_000))).toBeUndefined()
  })

  it("a large script runs from /tmp/t1-setup where the sandbox takes files there", async () => {
    const { end, puts, setup } = await setupRun(false)
    expect(puts).toEqual(["/tmp/t1-setup"])
    expect(setup).toBe("bash /tmp/t1-setup/setup.sh")
    expect(end.resolved).toBe(true)
  })

  it("falls back to a hidden folder in the workdir, removed by the same command, when /tmp is refused", async () => {
    const { end, puts, setup } = await setupRun(true)
    expect(puts).toEqual(["/app/.t1-setup"])
    expect(setup).toBe(
      "(bash /app/.t1-setup/setup.sh; __t1_rc=$?; rm -rf /app/.t1-setup; exit $__t1_rc)",
    )
    expect(end.resolved).toBe(true)
    expect(end.infraFailed).toBe(false)
  })
})
