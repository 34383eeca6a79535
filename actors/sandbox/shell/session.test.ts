import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ExecOptions } from "../driver.ts"
import { SandboxDied, type SandboxError } from "../errors.ts"
import { spawnShellProcess } from "../local/index.ts"
import { openShellSession, type ShellSession } from "./index.ts"
import type { ShellProcess, StartShell } from "./process.ts"

const text = (b: Uint8Array) => new TextDecoder().decode(b)
const quick: ExecOptions = { timeoutMs: 5000, maxOutputBytes: 64 * 1024 }

let dir = ""
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "t1-session-"))
})
afterAll(() => rm(dir, { recursive: true, force: true }))

/** A plain local bash, the simplest transport a session can speak through. */
const localBash: StartShell = () =>
  spawnShellProcess("setsid", ["bash", "--noprofile", "--norc"], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, LANG: "C.UTF-8" },
  })

const withSession = <A, E>(
  f: (session: ShellSession) => Effect.Effect<A, E>,
  startShell: StartShell = localBash,
) =>
  Effect.runPromise(
    Effect.acquireUseRelease(
      openShellSession({ id: "test", startShell, interruptGraceMs: 500 }),
      f,
      (session) => session.close,
    ),
  )

const failureTag = <A>(exit: Exit.Exit<A, SandboxError>) => {
  if (Exit.isSuccess(exit)) return undefined
  const e = Cause.findErrorOption(exit.cause)
  return Option.isSome(e) ? e.value._tag : "defect"
}

describe("shell session", () => {
  it("runs concurrent execs one at a time, in the order they were called", async () => {
    const results = await withSession((session) =>
      Effect.all(
        Array.from({ length: 6 }, (_, i) =>
          session.exec(
            `echo start ${i} >> order; sleep 0.0${i}; echo end ${i} >> order; echo ${i}`,
            quick,
          ),
        ),
        { concurrency: "unbounded" },
      ).pipe(
        Effect.andThen((r) =>
          Effect.map(session.exec("cat order; rm order", quick), (o) => [r, o] as const),
        ),
      ),
    )
    const [each, order] = results
    expect(each.map((r) => text(r.output))).toEqual(["0\n", "1\n", "2\n", "3\n", "4\n", "5\n"])
    expect(text(order.output)).toBe(
      Array.from({ length: 6 }, (_, i) => `start ${i}\nend ${i}\n`).join(""),
    )
  })

  it("passes arbitrary text through a heredoc unchanged", async () => {
    const text16 = fc.string({ unit: "binary", maxLength: 300 }).filter((s) => !s.includes("\0"))
    const samples = fc.sample(text16, { numRuns: 25, seed: 7 })
    const outputs = await withSession((session) =>
      Effect.forEach(samples, (s) =>
        Effect.map(session.exec(`cat <<'T1_EOF'\n${s}\nT1_EOF`, quick), (r) => r.output),
      ),
    )
    const encoder = new TextEncoder()
    outputs.forEach((out, i) => {
      const s = samples[i] as string
      // bash cannot end a heredoc on a line that is exactly its terminator; skip those samples.
      if (s.split("\n").includes("T1_EOF")) return
      expect([...out]).toEqual([...encoder.encode(`${s}\n`)])
    })
  })

  it("shows output that background jobs wrote between commands with the next command", async () => {
    const next = await withSession((session) =>
      Effect.gen(function* () {
        yield* session.exec("(sleep 0.2; echo from-the-background) &", quick)
        yield* Effect.sleep("500 millis")
        return yield* session.exec("echo now", quick)
      }),
    )
    expect(text(next.output)).toMatch(/from-the-background\nnow\n$/)
  })

  it("keeps its trailers when the command redirects the shell's own output", async () => {
    const [hidden, after, traced] = await withSession((session) =>
      Effect.gen(function* () {
        const hidden = yield* session.exec("exec >/dev/null 2>&1; echo gone", quick)
        const after = yield* session.exec("echo visible", quick)
        const traced = yield* session.exec("set -xv; echo traced; set +xv", quick)
        return [hidden, after, traced]
      }),
    )
    expect(text(hidden.output)).toBe("")
    expect(hidden.exitCode).toBe(0)
    expect(text(after.output)).toBe("visible\n")
    expect(text(traced.output)).toContain("traced\n")
    expect(text(traced.output)).not.toContain("__t1_")
  })

  it("carries a 1 MB command", async () => {
    const big = "x".repeat(1024 * 1024)
    const result = await withSession((session) => session.exec(`v='${big}'; echo \${#v}`, quick))
    expect(text(result.output)).toBe(`${1024 * 1024}\n`)
  })

  it("restarts the shell after an exec was abandoned half-way", async () => {
    const next = await withSession((session) =>
      Effect.gen(function* () {
        const fiber = yield* Effect.forkChild(session.exec("sleep 30", quick))
        yield* Effect.sleep("200 millis")
        yield* Fiber.interrupt(fiber)
        return yield* session.exec("echo fresh", quick)
      }),
    )
    expect(text(next.output)).toBe("fresh\n")
    expect(next.sessionRestarted).toBe(true)
  })

  it("fails later execs with SandboxNotFound once closed; close is idempotent", async () => {
    const outcome = await Effect.runPromise(
      Effect.gen(function* () {
        const session = yield* openShellSession({ id: "closing", startShell: localBash })
        yield* session.close
        yield* session.close
        return yield* Effect.exit(session.exec("echo hi", quick))
      }),
    )
    expect(failureTag(outcome)).toBe("SandboxNotFound")
  })

  it("passes a SandboxError from startShell through as it is", async () => {
    const outcome = await Effect.runPromise(
      Effect.exit(
        openShellSession({
          id: "dead",
          startShell: () => Promise.reject(new SandboxDied({ id: "dead", reason: "gone" })),
        }),
      ),
    )
    expect(failureTag(outcome)).toBe("SandboxDied")
  })

  it("gives up on a shell that never answers its prologue, as an infra error", async () => {
    let closed = false
    const mute: ShellProcess = {
      write: async () => undefined,
      onOutput: () => undefined,
      onExit: () => undefined,
      signal: async () => undefined,
      close: async () => {
        closed = true
      },
    }
    const outcome = await Effect.runPromise(
      Effect.exit(
        openShellSession({ id: "mute", startShell: async () => mute, startTimeoutMs: 200 }),
      ),
    )
    expect(failureTag(outcome)).toBe("SandboxInfraError")
    expect(closed).toBe(true)
  })

  it("rejects invalid options as InvalidCommand", async () => {
    const outcomes = await withSession((session) =>
      Effect.all([
        Effect.exit(session.exec("true", { timeoutMs: 0, maxOutputBytes: 10 })),
        Effect.exit(session.exec("true", { timeoutMs: 10, maxOutputBytes: -1 })),
      ]),
    )
    expect(outcomes.map(failureTag)).toEqual(["InvalidCommand", "InvalidCommand"])
  })
})
