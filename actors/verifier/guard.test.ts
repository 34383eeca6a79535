import { Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import type { SealOptions, SealReport } from "../sandbox/index.ts"
import { TOOLCHAIN_BASH, TOOLCHAIN_TIMEOUT } from "../sandbox/index.ts"
import { SandboxCallFailed } from "./errors.ts"
import { guard, PRISTINE_PATHS, UNGUARDED } from "./guard.ts"
import type { ShellResult, VerifierSandboxShape } from "./port.ts"

const result = (text: string, exitCode = 0): ShellResult => ({
  output: new TextEncoder().encode(text),
  exitCode,
  timedOut: false,
  truncated: false,
  sessionRestarted: false,
})

const sealed = (over: Partial<SealReport> = {}): SealReport => ({
  toolchain: true,
  stopped: 0,
  restored: [],
  restoredCount: 0,
  removed: [],
  removedCount: 0,
  durationMs: 600,
  ...over,
})

/** A sandbox whose seal and argv execs answer as told, recording what the guard asked. */
const sandboxOf = (answers: {
  readonly seal?: Effect.Effect<SealReport, SandboxCallFailed> | undefined
  readonly argv?: (argv: ReadonlyArray<string>) => Effect.Effect<ShellResult, SandboxCallFailed>
}) => {
  const calls = { seals: [] as SealOptions[], argv: [] as ReadonlyArray<string>[], shell: 0 }
  const sandbox: VerifierSandboxShape = {
    exec: () => {
      calls.shell++
      return Effect.succeed(result("agent's shell"))
    },
    execArgv: (argv) => {
      calls.argv.push(argv)
      return answers.argv?.(argv) ?? Effect.succeed(result("t1v-ready\n"))
    },
    ...(answers.seal === undefined
      ? {}
      : {
          seal: (options: SealOptions) => {
            calls.seals.push(options)
            return answers.seal as Effect.Effect<SealReport, SandboxCallFailed>
          },
        }),
    put: () => Effect.void,
    maxPutBytes: Number.POSITIVE_INFINITY,
  }
  return { sandbox, calls }
}

const refused = (reason: string, infra = false) =>
  Effect.fail(new SandboxCallFailed({ operation: "seal", reason, infra }))

describe("guard", () => {
  it("seals with the site directories, probes the toolchain from / and runs scripts with it", async () => {
    const { sandbox, calls } = sandboxOf({
      seal: Effect.succeed(
        sealed({
          stopped: 3,
          restored: ["/usr/lib/python3/dist-packages/pluggy/_hooks.py"],
          restoredCount: 1,
        }),
      ),
    })
    const g = await Effect.runPromise(guard(sandbox, { workdir: "/app" }))
    expect(g.guarded).toBe(true)
    expect(g.unverifiable).toBeUndefined()
    expect(calls.seals[0]?.pristinePaths).toEqual(PRISTINE_PATHS)
    const probe = calls.argv[0] ?? []
    expect(probe.slice(0, 1)).toEqual([TOOLCHAIN_TIMEOUT])
    expect(probe).toContain(TOOLCHAIN_BASH)
    expect(probe.at(-1)).toMatch(/\ncd \/\n\[ -d '\/app' \]/)
    expect(g.notes.join("\n")).toMatch(/stopped 3 processes/)
    expect(g.notes.join("\n")).toMatch(
      /changed or deleted 1 file .*image's own copies: .*pluggy\/_hooks\.py/,
    )
    await Effect.runPromise(
      g.sandbox.script?.("echo hi", { timeoutMs: 1000, maxOutputBytes: 10 }) ?? Effect.void,
    )
    expect(calls.argv).toHaveLength(2)
    expect(calls.shell).toBe(0)
  })

  it("a driver that cannot seal is verified unguarded, and says so", async () => {
    const { sandbox, calls } = sandboxOf({})
    const g = await Effect.runPromise(guard(sandbox, { workdir: "/app" }))
    expect(g.guarded).toBe(false)
    expect(g.python).toBeUndefined()
    expect(g.notes.join("\n")).toContain(UNGUARDED)
    expect(calls.argv).toHaveLength(0)
  })

  it("a sandbox its host created without the toolchain is unguarded, and says so", async () => {
    const { sandbox } = sandboxOf({ seal: Effect.succeed(sealed({ toolchain: false })) })
    const g = await Effect.runPromise(guard(sandbox, { workdir: "/app" }))
    expect(g.guarded).toBe(false)
    expect(g.notes.join("\n")).toMatch(/could have replaced: the sandbox has no verifier toolchain/)
  })

  describe("fails closed: unverifiable with the reason, never the sandbox's own programs", () => {
    const unverifiable = async (s: ReturnType<typeof sandboxOf>) => {
      const g = await Effect.runPromise(guard(s.sandbox, { workdir: "/app" }))
      expect(g.guarded).toBe(true)
      expect(g.sandbox.script).toBeUndefined()
      expect(s.calls.shell).toBe(0)
      return g.unverifiable ?? ""
    }

    it("a seal the host refuses (the reaper's successor failing)", async () => {
      const reason = await unverifiable(
        sandboxOf({ seal: refused("after the restart the sandbox runs 3 processes, expected 2") }),
      )
      expect(reason).toMatch(/could not be sealed.*runs 3 processes/)
    })

    it("a missing toolchain: the probe cannot start (exit 127)", async () => {
      const reason = await unverifiable(
        sandboxOf({
          seal: Effect.succeed(sealed()),
          argv: () =>
            Effect.succeed(result("exec: /.t1v/bin/timeout: no such file or directory", 127)),
        }),
      )
      expect(reason).toMatch(/toolchain does not run in this sandbox \(exit 127\): exec: \/\.t1v/)
    })

    it("a broken toolchain: its Python cannot import pytest", async () => {
      const reason = await unverifiable(
        sandboxOf({
          seal: Effect.succeed(sealed()),
          argv: () => Effect.succeed(result("ModuleNotFoundError: No module named 'pytest'", 1)),
        }),
      )
      expect(reason).toMatch(/exit 1\): ModuleNotFoundError/)
    })

    it("an exec the sandbox refuses", async () => {
      const reason = await unverifiable(
        sandboxOf({
          seal: Effect.succeed(sealed()),
          argv: () =>
            Effect.fail(
              new SandboxCallFailed({
                operation: "exec",
                reason: "OCI runtime exec failed",
                infra: false,
              }),
            ),
        }),
      )
      expect(reason).toMatch(/could not be started: OCI runtime exec failed/)
    })

    it("a removed workdir", async () => {
      const reason = await unverifiable(
        sandboxOf({
          seal: Effect.succeed(sealed()),
          argv: () => Effect.succeed(result("t1v-no-workdir\n", 3)),
        }),
      )
      expect(reason).toMatch(/workdir \/app is gone/)
    })
  })

  it("a failure of the machinery is an infra error, retried, not a verdict", async () => {
    const { sandbox } = sandboxOf({ seal: refused("engine unreachable", true) })
    const exit = await Effect.runPromiseExit(guard(sandbox, { workdir: "/app" }))
    expect(Exit.isFailure(exit)).toBe(true)
    expect(String(exit)).toMatch(/VerifierInfraError[\s\S]*engine unreachable/)
  })
})
