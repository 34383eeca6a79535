/**
 * Terminal-Bench 2 and 1 tasks in the shapes their authors write them (tasks/fixtures/shapes and
 * tasks/fixtures/unverifiable): test scripts that bootstrap uv and pytest over the network, a
 * `uv venv` + `uv pip install` + `uv run pytest`, one that copies a helper, unpacks private tests
 * and `cd`s before pytest, TB1's `uv init` + `uv add` and `pip install` + `python3 -m pytest`,
 * and one that asks for a package the base image lacks. None declares anything about internet.
 * Each runs on Docker as an episode does: the task's own image, a sandbox with the network the
 * task declares, the agent's (partial) work, then the verifier.
 */
import { randomUUID } from "node:crypto"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, ManagedRuntime, References } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectDocker, DockerDriverLive } from "../actors/sandbox/docker/index.ts"
import { SandboxDriver, sandboxSpec } from "../actors/sandbox/driver.ts"
import { resolveTaskImage } from "../actors/sandbox/image/index.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../actors/sandbox/image/testing.ts"
import {
  driverSandboxLayer,
  type VerifierOutcome,
  verifyEpisode,
} from "../actors/verifier/index.ts"
import { loadTasks, type Task } from "./index.ts"

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), "fixtures")

const quiet = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provideService(References.MinimumLogLevel, "Error"))

describe("real-shape Terminal-Bench tasks on Docker", () => {
  const docker = connectDocker()
  const runtime = ManagedRuntime.make(
    DockerDriverLive({ ownerId: `shapes-test-${randomUUID().slice(0, 6)}`, docker }),
  )
  const tasks = new Map<string, Task>()
  const images = new Map<string, string>()

  beforeAll(async () => {
    await ensureTestBaseImage()
    const loaded = await Effect.runPromise(
      quiet(
        loadTasks([
          join(FIXTURES, "shapes"),
          join(FIXTURES, "unverifiable"),
          join(FIXTURES, "tb2", "csv-column-sum"),
        ]),
      ),
    )
    for (const task of loaded) {
      tasks.set(task.id, task)
      const resolved = await Effect.runPromise(quiet(resolveTaskImage(task, { docker })))
      images.set(task.id, resolved.image)
    }
  }, BASE_IMAGE_TIMEOUT_MS)
  afterAll(() => runtime.dispose())

  interface Run {
    readonly outcome: VerifierOutcome
    /** Network interfaces of the sandbox before and after the verification. */
    readonly interfaces: readonly [string, string]
  }

  /** An episode stand-in: the task's sandbox, the agent's `work` in its workdir, the verifier. */
  const episode = (id: string, work: string): Promise<Run> => {
    const task = tasks.get(id)
    const image = images.get(id)
    if (task === undefined || image === undefined) throw new Error(`no fixture ${id}`)
    return runtime.runPromise(
      quiet(
        Effect.gen(function* () {
          const driver = yield* SandboxDriver
          const info = yield* driver.create(
            sandboxSpec({
              image,
              workdir: task.environment.workdir,
              network: task.environment.allowInternet,
              cpus: 1,
              memoryMb: 1024,
              ttlMs: 10 * 60_000,
            }),
          )
          return yield* Effect.gen(function* () {
            const interfaces = () =>
              driver
                .exec(info.id, "ls /sys/class/net | sort | tr '\\n' ' '", {
                  timeoutMs: 10_000,
                  maxOutputBytes: 4096,
                })
                .pipe(Effect.map((r) => new TextDecoder().decode(r.output).trim()))
            if (work !== "") {
              const r = yield* driver.exec(info.id, work, {
                timeoutMs: 30_000,
                maxOutputBytes: 8192,
              })
              if (r.exitCode !== 0)
                throw new Error(`agent work failed: ${new TextDecoder().decode(r.output)}`)
            }
            const before = yield* interfaces()
            const outcome = yield* verifyEpisode(task).pipe(
              Effect.provide(driverSandboxLayer(driver, info.id)),
            )
            const after = yield* interfaces()
            return { outcome, interfaces: [before, after] as const }
          }).pipe(Effect.ensuring(Effect.ignore(driver.destroy(info.id))))
        }),
      ),
    )
  }

  const score = (o: VerifierOutcome) => [o.kind, o.passed, o.total]
  const failing = (o: VerifierOutcome) =>
    o.tests.filter((t) => t.outcome !== "passed").map((t) => t.name)

  it("TB2 curl + uv + `uvx -w pytest -w pytest-json-ctrf pytest --ctrf …`: 3 of 5 regions is 3/5", async () => {
    const work = [
      "mkdir -p /app/totals",
      "echo 150 > /app/totals/north.txt",
      "echo 100 > /app/totals/south.txt",
      "echo 400 > /app/totals/east.txt",
      "echo 41 > /app/totals/west.txt",
    ].join(" && ")
    const { outcome, interfaces } = await episode("region-totals", work)
    expect(score(outcome)).toEqual(["scored", 3, 5])
    expect([outcome.path, outcome.mode]).toEqual(["rewritten-script", "pytest"])
    expect(outcome.pathReason).toContain("over the network")
    expect(failing(outcome)).toEqual([
      "test_outputs.py::test_west",
      "test_outputs.py::test_central",
    ])
    expect(outcome.notes.join("\n")).toContain("curl -LsSf https://astral.sh/uv/0.9.5/install.sh")
    // Nothing declared about internet: Harbor's default allows it, and the sandbox keeps it.
    expect(interfaces[0]).toMatch(/eth0/)
    expect(interfaces[1]).toBe(interfaces[0])
  })

  it("TB2 `uv venv` + `uv pip install` + `uv run pytest`: per parametrized test", async () => {
    const work =
      "mkdir -p greetings && for n in ada grace linus; do printf 'Hello, %s!\\n' $n > greetings/$n.txt; done"
    const { outcome } = await episode("greetings", work)
    expect(score(outcome)).toEqual(["scored", 3, 5])
    expect(outcome.path).toBe("rewritten-script")
    expect(failing(outcome)).toEqual([
      "test_outputs.py::test_greeting[barbara]",
      "test_outputs.py::test_greeting[ken]",
    ])
  })

  it("TB2 script that unpacks private tests, copies a helper and cds before pytest", async () => {
    const work = "printf '[server]\\nhost = 127.0.0.1\\nport = 8080\\n' > /app/service.ini"
    const { outcome } = await episode("config-sections", work)
    // 2 public tests pass; the 3 private ones (unpacked by the script) fail.
    expect(score(outcome)).toEqual(["scored", 2, 5])
    expect(outcome.tests.map((t) => t.name)).toContain("test_private.py::test_logging_level")
  })

  it("TB1 `uv init` + `uv add pytest` + `uv run pytest $TEST_DIR/…`: per test, and 0/5 for no work", async () => {
    const partial =
      "printf 'Grace Hopper\\nBarbara Liskov\\nAda Lovelace\\nKen Thompson\\nDennis Ritchie\\nAlan Turing\\n' > /app/sorted.txt"
    const { outcome } = await episode("tb1-sorted-names", partial)
    expect(score(outcome)).toEqual(["scored", 3, 5])
    expect(outcome.path).toBe("rewritten-script")
    const noop = await episode("tb1-sorted-names", "")
    expect(score(noop.outcome)).toEqual(["scored", 0, 5])
  })

  it("TB1 `apt-get … && pip install` + `cd $TEST_DIR` + `python3 -m pytest`", async () => {
    const { outcome } = await episode(
      "tb1-port-config",
      "sed -i 's/^PORT=.*/PORT=9090/' settings.env",
    )
    expect(score(outcome)).toEqual(["scored", 1, 4])
    expect(outcome.path).toBe("rewritten-script")
  })

  it("a package the sandbox lacks makes the verification unverifiable, never a 0", async () => {
    const { outcome } = await episode("matrix-trace", "echo 15 > /app/trace.txt")
    expect(outcome.kind).toBe("unverifiable")
    expect(outcome.missing).toEqual(["numpy==2.3.2"])
    expect([outcome.reward, outcome.resolved, outcome.tests.length]).toEqual([0, false, 0])
    expect(outcome.pathReason).toContain("numpy==2.3.2")
  })

  it("a task that declares no internet keeps a sandbox without network", async () => {
    const { outcome, interfaces } = await episode("csv-column-sum", "")
    expect(outcome.kind).toBe("scored")
    expect(interfaces).toEqual(["lo", "lo"])
  })
})
