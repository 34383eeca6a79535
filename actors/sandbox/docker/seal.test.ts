import { randomUUID } from "node:crypto"
import { Effect, Exit, Layer, ManagedRuntime, Schedule } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Bus, MemoryBusLive, subjectsFor } from "../../../services/bus/index.ts"
import { Metrics, makeMetrics } from "../../../services/metrics/index.ts"
import { sandboxClient } from "../client.ts"
import {
  type ExecOptions,
  SandboxDriver,
  type SandboxDriverShape,
  type SandboxSpec,
  type SealOptions,
  type SealReport,
} from "../driver.ts"
import type { SandboxError } from "../errors.ts"
import { testHostOptions } from "../host.fixture.ts"
import { runSandboxHost } from "../host.ts"
import { BASE_IMAGE } from "../image/index.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../image/testing.ts"
import { TOOLCHAIN_BIN } from "../toolchain/index.ts"
import { connectDocker, DockerDriverLive } from "./index.ts"
import { freshProcesses } from "./seal.ts"
import { SEAL_HELPER_LABEL } from "./seal-restore.ts"
import { containerOptions, TOOLCHAIN_LABEL } from "./spec.ts"

const owner = `test-seal-${randomUUID().slice(0, 8)}`
const docker = connectDocker()
const runtime = ManagedRuntime.make(DockerDriverLive({ ownerId: owner, docker }))
const bare = ManagedRuntime.make(
  DockerDriverLive({ ownerId: `${owner}-bare`, docker, toolchainImage: false }),
)

const spec: SandboxSpec = {
  image: BASE_IMAGE,
  cpus: 1,
  memoryMb: 512,
  pidsLimit: 128,
  network: false,
  user: "",
  workdir: "/app",
  env: {},
  labels: {},
  ttlMs: 120_000,
}
const quick: ExecOptions = { timeoutMs: 20_000, maxOutputBytes: 256 * 1024 }
const SITE = "/usr/lib/python3/dist-packages"
const pristine: SealOptions = {
  pristinePaths: ["/usr/lib/python3*/dist-packages"],
  timeoutMs: 30_000,
}

type Runtime = typeof runtime
const use = <A>(
  f: (d: SandboxDriverShape) => Effect.Effect<A, SandboxError>,
  rt: Runtime = runtime,
) => rt.runPromise(SandboxDriver.use(f))

const sh = async (id: string, command: string, rt: Runtime = runtime) => {
  const result = await use((d) => d.exec(id, command, quick), rt)
  return new TextDecoder().decode(result.output)
}

const seal = (id: string, options: SealOptions = pristine, rt: Runtime = runtime) =>
  use((d) => d.seal?.(id, options) ?? Effect.die("the docker driver seals"), rt)

const sealFailure = async (id: string, options: SealOptions) => {
  const exit = await runtime.runPromise(
    Effect.exit(SandboxDriver.use((d) => d.seal?.(id, options) ?? Effect.die("no seal"))),
  )
  if (Exit.isSuccess(exit)) throw new Error("expected the seal to fail")
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  if (reason?._tag !== "Fail") throw new Error(`no typed failure: ${exit.cause}`)
  return reason.error
}

/** `docker top` of the sandbox: each process's parent pid and command line. */
const processes = async (id: string) => {
  const top = (await docker.getContainer(id).top({ ps_args: "-o pid,ppid,args" })) as {
    Processes: string[][]
  }
  return top.Processes.map((row) => row.slice(2).join(" ")).sort()
}

const argv = (id: string, args: ReadonlyArray<string>) =>
  use((d) => d.execArgv?.(id, args, quick) ?? Effect.die("the docker driver has execArgv"))

/** What runs in a sandbox with the toolchain when nothing else does (sorted). */
const FRESH = [
  `${TOOLCHAIN_BIN}/sleep infinity`,
  `/sbin/docker-init -- ${TOOLCHAIN_BIN}/sleep infinity`,
]

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

beforeAll(async () => {
  await ensureTestBaseImage()
}, BASE_IMAGE_TIMEOUT_MS)

afterAll(async () => {
  for (const rt of [runtime, bare]) {
    const mine = await rt.runPromise(SandboxDriver.use((d) => d.list))
    for (const s of mine.filter((s) => s.labels["t1.owner"]?.startsWith(owner)))
      await rt.runPromise(SandboxDriver.use((d) => d.destroy(s.id)))
    await rt.dispose()
  }
}, 60_000)

describe("docker driver: seal", () => {
  it("stops every process the agent left (a fork loop too), restarts init and the toolchain's sleep, keeps its files", async () => {
    const info = await use((d) => d.create(spec))
    try {
      expect(await processes(info.id)).toEqual(FRESH)
      await sh(
        info.id,
        [
          "echo agent > /app/work.txt; echo tmp > /tmp/t.txt",
          "nohup sleep 1000 >/dev/null 2>&1 &",
          // A chain that forks on and on: each child starts the next and exits.
          "nohup bash -c 'f() { sleep 0.05; f & exit; }; f' >/dev/null 2>&1 &",
          "sleep 0.3",
        ].join("\n"),
      )
      const before = await processes(info.id)
      expect(before.length).toBeGreaterThan(3)
      const report = await seal(info.id)
      expect(report).toMatchObject({
        toolchain: true,
        restored: [],
        restoredCount: 0,
        removed: [],
        removedCount: 0,
      })
      // sleep 1000, the shell's bash (and its setsid), the fork chain's current member(s).
      expect(report.stopped).toBeGreaterThanOrEqual(3)
      await new Promise((r) => setTimeout(r, 300))
      expect(await processes(info.id)).toEqual(FRESH)
      const files = await argv(info.id, [`${TOOLCHAIN_BIN}/cat`, "/app/work.txt", "/tmp/t.txt"])
      expect(new TextDecoder().decode(files.output)).toBe("agent\ntmp\n")
      // The agent's session is gone; a later exec gets a fresh shell in the workdir.
      expect(await sh(info.id, "pwd; jobs | wc -l")).toBe("/app\n0\n")
    } finally {
      await use((d) => d.destroy(info.id))
    }
  }, 90_000)

  it("puts back what the agent changed or deleted under the pristine paths and removes what it added", async () => {
    const info = await use((d) => d.create(spec))
    try {
      const original = await sh(
        info.id,
        `md5sum ${SITE}/pytest/__init__.py ${SITE}/_pytest/python.py`,
      )
      await sh(
        info.id,
        [
          `echo 'raise SystemExit(0)' > ${SITE}/pytest/__init__.py`,
          `rm ${SITE}/_pytest/python.py`,
          `rm -r ${SITE}/iniconfig`,
          `echo 'import os' > ${SITE}/zz-evil.pth`,
          `mkdir ${SITE}/evilpkg && echo x > ${SITE}/evilpkg/__init__.py`,
          // Not pristine: stays.
          "echo kept > /usr/local/kept.txt",
        ].join("\n"),
      )
      const report = await seal(info.id)
      expect(report.restored).toEqual([
        `${SITE}/_pytest/python.py`,
        `${SITE}/iniconfig`,
        `${SITE}/pytest/__init__.py`,
      ])
      expect(report.restoredCount).toBe(3)
      expect(report.removed).toEqual([
        `${SITE}/evilpkg`,
        `${SITE}/evilpkg/__init__.py`,
        `${SITE}/zz-evil.pth`,
      ])
      expect(report.removedCount).toBe(3)
      expect(await sh(info.id, `md5sum ${SITE}/pytest/__init__.py ${SITE}/_pytest/python.py`)).toBe(
        original,
      )
      expect(
        await sh(
          info.id,
          `ls ${SITE}/iniconfig/__init__.py; ls ${SITE} | grep -c evil; cat /usr/local/kept.txt; python3 -c 'import pytest, iniconfig; print(pytest.__version__ != "")'`,
        ),
      ).toBe(`${SITE}/iniconfig/__init__.py\n0\nkept\nTrue\n`)
      // Sealing again finds nothing left to do (but the shell of the checks above), and no helper
      // container stays behind.
      const again = await seal(info.id)
      expect([again.restoredCount, again.removedCount]).toEqual([0, 0])
      const helpers = await docker.listContainers({
        all: true,
        filters: { label: [`${SEAL_HELPER_LABEL}=${info.id}`] },
      })
      expect(helpers).toEqual([])
    } finally {
      await use((d) => d.destroy(info.id))
    }
  }, 90_000)

  it("replaces a pristine directory the agent swapped for a link", async () => {
    const info = await use((d) => d.create(spec))
    try {
      await sh(
        info.id,
        [
          "mkdir -p /tmp/fake/pytest && echo 'raise SystemExit(0)' > /tmp/fake/pytest/__init__.py",
          `rm -r ${SITE}/pytest && ln -s /tmp/fake/pytest ${SITE}/pytest`,
        ].join("\n"),
      )
      const report = await seal(info.id)
      expect(report.restored).toEqual([`${SITE}/pytest`])
      expect(
        await sh(info.id, `test -L ${SITE}/pytest || echo dir; cat /tmp/fake/pytest/__init__.py`),
      ).toBe("dir\nraise SystemExit(0)\n")
      // Above the pristine directory: /usr/lib/python3 itself, a link to a patched copy.
      await sh(
        info.id,
        [
          "cp -a /usr/lib/python3 /tmp/py3",
          "echo 'raise SystemExit(0)' > /tmp/py3/dist-packages/pytest/__init__.py",
          "rm -rf /usr/lib/python3 && ln -s /tmp/py3 /usr/lib/python3",
        ].join("\n"),
      )
      const above = await seal(info.id)
      expect(above.restored).toEqual(["/usr/lib/python3"])
      expect(
        await sh(
          info.id,
          `test -L /usr/lib/python3 || echo dir; grep -c SystemExit ${SITE}/pytest/__init__.py`,
        ),
      ).toBe("dir\n0\n")
    } finally {
      await use((d) => d.destroy(info.id))
    }
  }, 90_000)

  it("runs argv from / even when the agent removed the workdir", async () => {
    const info = await use((d) => d.create({ ...spec, workdir: "/work/agent" }))
    try {
      await sh(info.id, "cd / && rm -rf /work")
      const result = await argv(info.id, [`${TOOLCHAIN_BIN}/pwd`])
      expect([new TextDecoder().decode(result.output), result.exitCode]).toEqual(["/\n", 0])
    } finally {
      await use((d) => d.destroy(info.id))
    }
  }, 60_000)

  it("leaves a sandbox without the toolchain untouched", async () => {
    const info = await use((d) => d.create(spec), bare)
    try {
      await sh(info.id, "nohup sleep 1000 >/dev/null 2>&1 &", bare)
      const pidBefore = (await docker.getContainer(info.id).inspect()).State.Pid
      const report = await seal(info.id, pristine, bare)
      expect(report).toMatchObject({
        toolchain: false,
        stopped: 0,
        restored: [],
        restoredCount: 0,
        removed: [],
        removedCount: 0,
      })
      expect((await docker.getContainer(info.id).inspect()).State.Pid).toBe(pidBefore)
      expect(await processes(info.id)).toContain("sleep 1000")
    } finally {
      await use((d) => d.destroy(info.id), bare)
    }
  }, 60_000)

  it("refuses bad pristine paths and answers SandboxNotFound for a missing sandbox", async () => {
    for (const pristinePaths of [["relative/dir"], ["/usr/../etc"], ["/"]]) {
      const error = await sealFailure("whatever", { pristinePaths, timeoutMs: 10_000 })
      expect(error._tag === "InvalidSandboxSpec" ? error.field : error._tag).toBe("pristinePaths")
    }
    expect((await sealFailure("0123456789ab-never-existed", pristine))._tag).toBe("SandboxNotFound")
  })

  it("seals over the bus: a sandbox host on this driver answers the client", async () => {
    const hostOwner = `${owner}-bus`
    const subjects = subjectsFor("sealbus")
    const got = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const base = testHostOptions(subjects, hostOwner)
          yield* Effect.forkScoped(
            runSandboxHost({
              ...base,
              defaults: { ...base.defaults, image: BASE_IMAGE, workdir: "/app" },
            }).pipe(Effect.provide(DockerDriverLive({ ownerId: hostOwner, docker }))),
          )
          const client = sandboxClient(bus, subjects)
          const { sandboxId } = yield* client.create({ image: BASE_IMAGE, workdir: "/app" }).pipe(
            Effect.retry({
              while: (e) => e._tag === "NoResponders",
              schedule: Schedule.spaced("100 millis"),
              times: 300,
            }),
          )
          yield* client.exec(
            sandboxId,
            `nohup sleep 1000 >/dev/null 2>&1 & echo x >> ${SITE}/pytest/__init__.py`,
          )
          const report = yield* client.seal(sandboxId, pristine)
          const left = yield* Effect.promise(() => processes(sandboxId))
          yield* client.destroy(sandboxId)
          return { report, left }
        }),
      ).pipe(
        Effect.provide(
          Layer.mergeAll(
            MemoryBusLive(),
            Layer.succeed(Metrics, makeMetrics({ defaultMetrics: false })),
          ),
        ),
      ),
    )
    expect(got.report).toMatchObject({
      toolchain: true,
      restored: [`${SITE}/pytest/__init__.py`],
      restoredCount: 1,
      removedCount: 0,
    })
    // sleep 1000 and the agent's shell (setsid and bash).
    expect(got.report?.stopped).toBeGreaterThanOrEqual(2)
    expect(got.left).toEqual(FRESH)
  }, 90_000)

  it("gives up with an infra error at its timeout, leaving no helper behind", async () => {
    const info = await use((d) => d.create(spec))
    try {
      await sh(info.id, `echo x >> ${SITE}/pytest/__init__.py`)
      const error = await sealFailure(info.id, { ...pristine, timeoutMs: 1 })
      expect([error._tag, error.message]).toEqual([
        "SandboxInfraError",
        "seal failed: not done within 1 ms",
      ])
      await new Promise((r) => setTimeout(r, 2000))
      const helpers = await docker.listContainers({
        all: true,
        filters: { label: [`${SEAL_HELPER_LABEL}=${info.id}`] },
      })
      expect(helpers).toEqual([])
    } finally {
      await use((d) => d.destroy(info.id))
    }
  }, 60_000)

  it("fails closed on a sandbox whose main process the agent could have replaced", async () => {
    const made = await use((d) => d.create(spec))
    const volume = (await docker.getContainer(made.id).inspect()).Config.Labels[TOOLCHAIN_LABEL]
    await use((d) => d.destroy(made.id))
    // As an older driver made them: the toolchain mounted, the image's own sleep as main process.
    const config = containerOptions(
      { ...spec, workdir: "/" },
      { owner, createdAtMs: Date.now(), toolchain: volume },
    )
    const old = await docker.createContainer({ ...config, Entrypoint: ["sleep", "infinity"] })
    try {
      await old.start()
      await sh(old.id, "nohup sleep 1000 >/dev/null 2>&1 &")
      const error = await sealFailure(old.id, pristine)
      expect(error._tag).toBe("SandboxInfraError")
      expect(error.message).toContain("the agent could have replaced it")
      // Refused before anything was stopped.
      expect(await processes(old.id)).toContain("sleep 1000")
    } finally {
      await old.remove({ force: true })
    }
  }, 60_000)

  it("accepts only docker-init and the toolchain's sleep after the restart", () => {
    const init = { pid: 10, ppid: 1, args: `/sbin/docker-init -- ${TOOLCHAIN_BIN}/sleep infinity` }
    const main = { pid: 11, ppid: 10, args: `${TOOLCHAIN_BIN}/sleep infinity` }
    expect(freshProcesses([init, main], 10)).toBe("ok")
    expect(freshProcesses([init], 10)).toBe("starting")
    expect(freshProcesses([init, { ...main, args: init.args }], 10)).toBe("starting")
    // Mid-exec (seen under load): the name is set, the arguments not yet.
    expect(freshProcesses([init, { ...main, args: "[sleep]" }], 10)).toBe("starting")
    expect(freshProcesses([init, { ...main, args: "[sh]" }], 10)).toMatch(/unexpected/)
    expect(freshProcesses([init, { ...main, args: "[sleep] <defunct>" }], 10)).toMatch(/unexpected/)
    expect(freshProcesses([init, main, { pid: 12, ppid: 10, args: "sh -c evil" }], 10)).toMatch(
      /unexpected processes after the restart: .*12 \(parent 10\) "sh -c evil"/,
    )
    expect(freshProcesses([init, { ...main, args: "sleep infinity" }], 10)).toMatch(/unexpected/)
    // Init not (yet) docker-init, or not listed yet: starting, failed by the caller's deadline.
    expect(freshProcesses([{ ...init, args: "runc init" }, main], 10)).toBe("starting")
    expect(freshProcesses([init, main], 99)).toBe("starting")
    expect(
      freshProcesses([{ ...init, args: "/sbin/docker-init -- sleep infinity" }, main], 10),
    ).toMatch(/is not running docker-init with/)
  })

  it("measures: an idle seal, and one restoring a few files", async () => {
    const info = await use((d) => d.create(spec))
    try {
      const idle: number[] = []
      for (let i = 0; i < 5; i++) idle.push((await seal(info.id)).durationMs)
      const restoring: number[] = []
      for (let i = 0; i < 3; i++) {
        await sh(
          info.id,
          `for f in pytest/__init__.py _pytest/main.py _pytest/runner.py; do echo '#' >> ${SITE}/$f; done; touch ${SITE}/added-${i}.py`,
        )
        const report: SealReport = await seal(info.id)
        expect([report.restoredCount, report.removedCount]).toEqual([3, 1])
        restoring.push(report.durationMs)
      }
      console.log(
        `seal durations (ms): idle ${idle.join(", ")} (median ${median(idle)}); restoring 3 files and removing 1: ${restoring.join(", ")} (median ${median(restoring)})`,
      )
      // Whole milliseconds: SealSandboxResult.duration_ms is a uint32 on the wire.
      expect([...idle, ...restoring].every((ms) => Number.isInteger(ms) && ms > 0)).toBe(true)
    } finally {
      await use((d) => d.destroy(info.id))
    }
  }, 120_000)
})
