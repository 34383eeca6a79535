import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import Dockerode from "dockerode"
import { Effect, Exit, ManagedRuntime } from "effect"
import * as tar from "tar-stream"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sandboxDriverContract } from "../driver.contract.ts"
import {
  DEFAULT_PIDS_LIMIT,
  type ExecOptions,
  LABELS,
  SandboxDriver,
  type SandboxDriverShape,
  type SandboxSpec,
} from "../driver.ts"
import type { SandboxError } from "../errors.ts"
import { BASE_IMAGE } from "../image/index.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../image/testing.ts"
import { TOOLCHAIN_BASH, TOOLCHAIN_ROOT, TOOLCHAIN_TIMEOUT } from "../toolchain/index.ts"
import { bridgeName } from "./firewall.ts"
import { CAPABILITIES, connectDocker, DockerDriverLive, makeDockerDriver } from "./index.ts"
import { SANDBOX_NETWORK } from "./spec.ts"

const owner = `test-${randomUUID().slice(0, 8)}`
const docker = connectDocker()
const runtime = ManagedRuntime.make(DockerDriverLive({ ownerId: owner, docker }))

const spec = (overrides: Partial<SandboxSpec> = {}): SandboxSpec => ({
  image: BASE_IMAGE,
  cpus: 0.5,
  memoryMb: 256,
  pidsLimit: 64,
  network: false,
  user: "",
  workdir: "/app",
  env: { T1_TEST: "yes" },
  labels: { [LABELS.job]: "job-1", [LABELS.episode]: "ep-1" },
  ttlMs: 60_000,
  ...overrides,
})

const quick: ExecOptions = { timeoutMs: 10_000, maxOutputBytes: 64 * 1024 }

const withDriver = <A, E extends SandboxError>(f: (d: SandboxDriverShape) => Effect.Effect<A, E>) =>
  runtime.runPromise(SandboxDriver.use(f))

/** The error a driver call failed with (the test fails if it succeeded). */
const failure = async <A>(
  f: (d: SandboxDriverShape) => Effect.Effect<A, SandboxError>,
): Promise<SandboxError> => {
  const exit = await runtime.runPromise(Effect.exit(SandboxDriver.use(f)))
  if (Exit.isSuccess(exit)) throw new Error("expected a failure, got success")
  const error = exit.cause.reasons.find((r) => r._tag === "Fail")
  if (error === undefined || error._tag !== "Fail")
    throw new Error(`no typed failure: ${exit.cause}`)
  return error.error
}

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

const run = async (id: string, command: string, options: ExecOptions = quick) => {
  const result = await withDriver((d) => d.exec(id, command, options))
  return { ...result, text: text(result.output) }
}

const packTar = async (files: Record<string, string>): Promise<Uint8Array> => {
  const pack = tar.pack()
  for (const [name, body] of Object.entries(files)) pack.entry({ name, mode: 0o644 }, body)
  pack.finalize()
  const chunks: Buffer[] = []
  for await (const chunk of pack) chunks.push(Buffer.from(chunk as Uint8Array))
  return new Uint8Array(Buffer.concat(chunks))
}

const unpackTar = async (bytes: Uint8Array): Promise<Record<string, string>> => {
  const extract = tar.extract()
  const files: Record<string, string> = {}
  const done = (async () => {
    for await (const entry of extract) {
      const chunks: Buffer[] = []
      for await (const chunk of entry) chunks.push(Buffer.from(chunk as Uint8Array))
      if (entry.header.type === "file") files[entry.header.name] = Buffer.concat(chunks).toString()
    }
  })()
  extract.end(Buffer.from(bytes))
  await done
  return files
}

const mine = async () =>
  (await withDriver((d) => d.list)).filter((s) => s.labels[LABELS.owner] === owner)

beforeAll(async () => {
  await ensureTestBaseImage()
}, BASE_IMAGE_TIMEOUT_MS)

afterAll(async () => {
  for (const sandbox of await mine()) await withDriver((d) => d.destroy(sandbox.id))
  await runtime.dispose()
}, 60_000)

describe("docker driver: separate processes (execArgv) and the toolchain", () => {
  it("runs argv outside the agent's shell: nothing the shell set reaches it; timeouts, caps and exit codes", async () => {
    const info = await withDriver((d) => d.create(spec()))
    try {
      // The agent's shell: a function and an alias for echo, an exported variable, a DEBUG trap.
      await run(
        info.id,
        "echo() { builtin echo FORGED; }; alias echo='builtin echo FORGED'; export T1_AGENT=set; trap 'true' DEBUG",
      )
      expect((await run(info.id, "echo hi")).text).toBe("FORGED hi\n")
      const argv = (a: ReadonlyArray<string>, options: ExecOptions = quick) =>
        withDriver((d) => {
          const execArgv = d.execArgv
          if (execArgv === undefined) return Effect.die("the docker driver has execArgv")
          return execArgv(info.id, a, options)
        })
      const plain = await argv([
        TOOLCHAIN_BASH,
        "-c",
        'echo hi; echo "[$T1_AGENT][$T1_TEST]"; exit 3',
      ])
      expect([text(plain.output), plain.exitCode, plain.timedOut]).toEqual([
        "hi\n[][yes]\n",
        3,
        false,
      ])
      // Whole milliseconds: ExecResult.duration_ms is a uint32 on the wire.
      expect(Number.isInteger(plain.durationMs)).toBe(true)
      const big = await argv([TOOLCHAIN_BASH, "-c", "head -c 100000 /dev/zero | tr '\\0' x"], {
        timeoutMs: 10_000,
        maxOutputBytes: 1000,
      })
      expect([big.truncated, big.totalBytes, big.output.byteLength < 1200]).toEqual([
        true,
        100_000,
        true,
      ])
      const started = Date.now()
      const slow = await argv([TOOLCHAIN_BASH, "-c", "sleep 30"], {
        timeoutMs: 1000,
        maxOutputBytes: 1024,
      })
      expect([slow.timedOut, slow.exitCode]).toEqual([true, -1])
      expect(Date.now() - started).toBeLessThan(10_000)
      const limited = await argv([TOOLCHAIN_TIMEOUT, "1", TOOLCHAIN_BASH, "-c", "sleep 30"])
      expect(limited.exitCode).toBe(124)
      expect((await failure((d) => d.execArgv?.(info.id, [], quick) ?? Effect.void))._tag).toBe(
        "InvalidSandboxSpec",
      )
    } finally {
      await withDriver((d) => d.destroy(info.id))
    }
    expect((await failure((d) => d.execArgv?.(info.id, ["true"], quick) ?? Effect.void))._tag).toBe(
      "SandboxNotFound",
    )
  }, 60_000)

  it("mounts no toolchain when told not to (toolchainImage: false)", async () => {
    const bare = ManagedRuntime.make(
      DockerDriverLive({ ownerId: `${owner}-bare`, docker, toolchainImage: false }),
    )
    try {
      const info = await bare.runPromise(SandboxDriver.use((d) => d.create(spec())))
      const inspected = await docker.getContainer(info.id).inspect()
      expect(inspected.Mounts).toEqual([])
      await bare.runPromise(SandboxDriver.use((d) => d.destroy(info.id)))
    } finally {
      await bare.dispose()
    }
  }, 60_000)
})

describe("docker driver", () => {
  it("creates a sandbox with no network, its limits, dropped capabilities and only the read-only toolchain mounted", async () => {
    const info = await withDriver((d) => d.create(spec()))
    const inspected = await docker.getContainer(info.id).inspect()
    const host = inspected.HostConfig
    expect(host.NetworkMode).toBe("none")
    expect(host.PidsLimit).toBe(64)
    expect(host.NanoCpus).toBe(500_000_000)
    expect(host.Memory).toBe(256 * 1024 * 1024)
    expect(host.MemorySwap).toBe(256 * 1024 * 1024)
    expect(host.Privileged).toBe(false)
    expect(host.ReadonlyRootfs).toBe(false)
    expect(host.CapDrop).toEqual(["ALL"])
    expect([...(host.CapAdd ?? [])].sort()).toEqual([...CAPABILITIES].sort())
    expect(host.SecurityOpt).toContain("no-new-privileges:true")
    expect(host.Binds ?? []).toEqual([])
    // The one mount: the verifier's toolchain, a volume, read-only.
    expect(inspected.Mounts.map((m) => [m.Type, m.Destination, m.RW])).toEqual([
      ["volume", TOOLCHAIN_ROOT, false],
    ])
    expect(inspected.State.Running).toBe(true)
    expect(inspected.Config.Labels).toMatchObject({
      [LABELS.managed]: "true",
      [LABELS.owner]: owner,
      [LABELS.job]: "job-1",
      [LABELS.episode]: "ep-1",
      [LABELS.expiresAt]: String(info.expiresAtMs),
    })
    expect(info.expiresAtMs - info.createdAtMs).toBe(60_000)

    // From inside: loopback only, no engine socket, the capability set asked for, the workdir.
    const inside = await run(
      info.id,
      "ls /sys/class/net; test -e /var/run/docker.sock && echo SOCKET; grep CapEff /proc/self/status; pwd; echo $T1_TEST",
    )
    expect(inside.exitCode).toBe(0)
    const capEff = (1 << 0) | (1 << 1) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7) // CHOWN DAC_OVERRIDE FOWNER KILL SETGID SETUID
    expect(inside.text).toBe(`lo\nCapEff:\t${capEff.toString(16).padStart(16, "0")}\n/app\nyes\n`)
    await withDriver((d) => d.destroy(info.id))
  })

  it("defaults the pids limit, leaves cpu and memory to the engine when 0, and enforces pids", async () => {
    const info = await withDriver((d) => d.create(spec({ cpus: 0, memoryMb: 0, pidsLimit: 0 })))
    const host = (await docker.getContainer(info.id).inspect()).HostConfig
    expect(host.PidsLimit).toBe(DEFAULT_PIDS_LIMIT)
    expect(host.NanoCpus ?? 0).toBe(0)
    expect(host.Memory ?? 0).toBe(0)
    await withDriver((d) => d.destroy(info.id))

    const small = await withDriver((d) => d.create(spec({ pidsLimit: 20 })))
    // Python's fork fails at once where bash's would retry with back-off.
    const forks = await run(
      small.id,
      [
        "python3 -c '",
        "import os, time",
        "n = 0",
        "try:",
        "    for _ in range(40):",
        "        if os.fork() == 0:",
        "            time.sleep(2)",
        "            os._exit(0)",
        "        n += 1",
        "except OSError:",
        "    pass",
        "print(n)'",
      ].join("\n"),
    )
    expect(Number(forks.text.trim())).toBeGreaterThan(5)
    expect(Number(forks.text.trim())).toBeLessThan(20)
    await withDriver((d) => d.destroy(small.id))
  })

  it("firewalls the bridge of a networked sandbox unless networkFirewall is off", async () => {
    const asked: string[] = []
    const withFirewall = (networkFirewall: boolean) =>
      Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const d = yield* makeDockerDriver({
              ownerId: owner,
              docker,
              networkFirewall,
              installFirewall: (bridge) => Effect.sync(() => void asked.push(bridge)),
            })
            const offline = yield* d.create(spec())
            const online = yield* d.create({ ...spec(), network: true })
            yield* d.destroy(offline.id)
            yield* d.destroy(online.id)
          }),
        ),
      )
    await withFirewall(false)
    expect(asked).toEqual([])
    await withFirewall(true)
    // Once, for the networked sandbox only, on the sandbox network's bridge.
    expect(asked).toHaveLength(1)
    const [network] = await docker.listNetworks({ filters: { name: [SANDBOX_NETWORK] } })
    expect(asked).toEqual([bridgeName({ Id: network?.Id ?? "", Options: network?.Options })])
  })

  it("fails with ImageNotFound for an image the engine lacks, pulling nothing", async () => {
    const error = await failure((d) => d.create(spec({ image: "t1-no-such-image:404" })))
    expect(error._tag).toBe("ImageNotFound")
    expect(error.errorClass).toBe("task")
    expect(error.message).toContain("t1-no-such-image:404")
  })

  it("runs no HEALTHCHECK of the task image: it would run the agent's programs during verification", async () => {
    const image = `t1-test-healthcheck:${owner}`
    execFileSync("docker", ["build", "-q", "--network", "none", "-t", image, "-"], {
      input: `FROM ${BASE_IMAGE}\nHEALTHCHECK --interval=1s --start-period=1s CMD touch /tmp/healthcheck-ran\n`,
    })
    try {
      const info = await withDriver((d) => d.create(spec({ image })))
      try {
        const config = await docker.getContainer(info.id).inspect()
        expect(config.Config.Healthcheck?.Test).toEqual(["NONE"])
        await new Promise((resolve) => setTimeout(resolve, 3000))
        expect((await run(info.id, "ls /tmp/healthcheck-ran 2>&1; true")).text).toMatch(
          /No such file/,
        )
      } finally {
        await withDriver((d) => d.destroy(info.id))
      }
    } finally {
      execFileSync("docker", ["rmi", "-f", image], { stdio: "ignore" })
    }
  }, 60_000)

  it("rejects a bad spec with InvalidSandboxSpec naming the field, leaving no container", async () => {
    const cases: Array<[Partial<SandboxSpec>, string]> = [
      [{ image: "" }, "image"],
      [{ cpus: -1 }, "cpus"],
      [{ cpus: Number.NaN }, "cpus"],
      [{ memoryMb: Number.POSITIVE_INFINITY }, "memoryMb"],
      [{ memoryMb: 2 }, "memoryMb"],
      [{ pidsLimit: 1.5 }, "pidsLimit"],
      [{ pidsLimit: -3 }, "pidsLimit"],
      [{ ttlMs: 0 }, "ttlMs"],
      [{ workdir: "relative/dir" }, "workdir"],
      [{ workdir: "/a\nb" }, "workdir"],
      [{ user: "bad user" }, "user"],
      [{ env: { "1X": "y" } }, "env"],
      [{ labels: { [LABELS.owner]: "someone-else" } }, "labels"],
      // Checked by the engine (more CPUs than the host has) and by the container (no such user).
      [{ cpus: 4096 }, "cpus"],
      [{ user: "no-such-user" }, "user"],
    ]
    const before = (await mine()).length
    for (const [overrides, field] of cases) {
      const error = await failure((d) => d.create(spec(overrides)))
      expect({ overrides, tag: error._tag }).toEqual({ overrides, tag: "InvalidSandboxSpec" })
      if (error._tag === "InvalidSandboxSpec")
        expect({ overrides, field: error.field }).toEqual({ overrides, field })
    }
    expect((await mine()).length).toBe(before)
  })

  it("round-trips files through put and get, making the target directory", async () => {
    const info = await withDriver((d) => d.create(spec()))
    const long = `${"l".repeat(120)}/${"n".repeat(120)}.txt`
    const archive = await packTar({
      "hello.txt": "hello\n",
      "sub/deep.txt": "deep\n",
      [long]: "long\n",
    })
    await withDriver((d) => d.put(info.id, "/app/data", archive))
    const listed = await run(info.id, "cat data/hello.txt data/sub/deep.txt")
    expect(listed.text).toBe("hello\ndeep\n")
    const back = await unpackTar(await withDriver((d) => d.get(info.id, "/app/data")))
    expect(back).toEqual({
      "data/hello.txt": "hello\n",
      "data/sub/deep.txt": "deep\n",
      [`data/${long}`]: "long\n",
    })
    const one = await unpackTar(await withDriver((d) => d.get(info.id, "/app/data/hello.txt")))
    expect(one).toEqual({ "hello.txt": "hello\n" })

    const missing = await failure((d) => d.get(info.id, "/app/nothing-here"))
    expect(missing._tag).toBe("FileTransferError")
    const relative = await failure((d) => d.put(info.id, "app", archive))
    expect(relative._tag).toBe("FileTransferError")
    const garbage = await failure((d) => d.put(info.id, "/app", new Uint8Array([1, 2, 3])))
    expect(garbage._tag).toBe("FileTransferError")
    await withDriver((d) => d.destroy(info.id))
    const gone = await failure((d) => d.put(info.id, "/app", archive))
    expect(gone._tag).toBe("SandboxNotFound")
  })

  it("gives a non-root user a workdir and put files it owns, and interrupts its jobs", async () => {
    const info = await withDriver((d) =>
      d.create(spec({ user: "65534:65534", workdir: "/work/agent" })),
    )
    const archive = await packTar({ "task.txt": "x\n" })
    await withDriver((d) => d.put(info.id, "/work/agent", archive))
    const who = await run(
      info.id,
      "id -u; pwd; grep CapEff /proc/self/status; echo more >> task.txt && touch new && echo writable",
    )
    expect(who.text).toBe("65534\n/work/agent\nCapEff:\t0000000000000000\nwritable\n")
    // The timeout's SIGINT comes from an exec as the same user, which may signal its own jobs.
    const slow = await run(info.id, "sleep 30", { timeoutMs: 300, maxOutputBytes: 1024 })
    expect(slow).toMatchObject({ timedOut: true, exitCode: 130, sessionRestarted: false })
    expect((await run(info.id, "echo still here")).text).toBe("still here\n")

    // Another driver instance (another process, say) finds the same user and workdir.
    const other = await Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(makeDockerDriver({ ownerId: `${owner}-other`, docker }), (d) =>
          d.exec(info.id, "id -u; pwd; cat task.txt", quick),
        ),
      ),
    )
    expect(text(other.output)).toBe("65534\n/work/agent\nx\nmore\n")
    await withDriver((d) => d.destroy(info.id))
  })

  it("destroys idempotently; the sandbox is gone afterwards", async () => {
    const info = await withDriver((d) => d.create(spec()))
    await run(info.id, "true")
    await withDriver((d) => d.destroy(info.id))
    await withDriver((d) => d.destroy(info.id))
    await withDriver((d) => d.destroy("0123456789ab-never-existed"))
    await expect(docker.getContainer(info.id).inspect()).rejects.toMatchObject({ statusCode: 404 })
    expect((await failure((d) => d.exec(info.id, "true", quick)))._tag).toBe("SandboxNotFound")
    expect((await mine()).map((s) => s.id)).not.toContain(info.id)
  })

  it("leaves containers it does not manage alone", async () => {
    const stranger = await docker.createContainer({
      Image: BASE_IMAGE,
      Cmd: ["sleep", "infinity"],
      HostConfig: { NetworkMode: "none" },
    })
    try {
      await withDriver((d) => d.destroy(stranger.id))
      expect((await stranger.inspect()).Id).toBe(stranger.id)
      expect((await failure((d) => d.exec(stranger.id, "true", quick)))._tag).toBe(
        "SandboxNotFound",
      )
      expect((await failure((d) => d.get(stranger.id, "/etc/hostname")))._tag).toBe(
        "SandboxNotFound",
      )
    } finally {
      await stranger.remove({ force: true })
    }
  })

  it("reports SandboxDied when the container is killed from outside, before or during an exec", async () => {
    const before = await withDriver((d) => d.create(spec()))
    await run(before.id, "true")
    execFileSync("docker", ["kill", before.id], { stdio: "ignore" })
    const died = await failure((d) => d.exec(before.id, "echo hi", quick))
    expect(died._tag).toBe("SandboxDied")
    expect(died.errorClass).toBe("infra")

    // A sandbox never exec'd in before, killed: the first exec finds it dead too.
    const fresh = await withDriver((d) => d.create(spec()))
    execFileSync("docker", ["kill", fresh.id], { stdio: "ignore" })
    expect((await failure((d) => d.exec(fresh.id, "echo hi", quick)))._tag).toBe("SandboxDied")

    const during = await withDriver((d) => d.create(spec()))
    const running = runtime.runPromise(
      Effect.exit(SandboxDriver.use((d) => d.exec(during.id, "echo started; sleep 30", quick))),
    )
    await new Promise((r) => setTimeout(r, 500))
    execFileSync("docker", ["kill", during.id], { stdio: "ignore" })
    const exit = await running
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) {
      const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
      expect(reason?._tag === "Fail" ? reason.error._tag : String(exit.cause)).toBe("SandboxDied")
    }
    for (const id of [before.id, fresh.id, during.id]) await withDriver((d) => d.destroy(id))
  })

  it("lists the managed sandboxes with their labels and times", async () => {
    const a = await withDriver((d) => d.create(spec({ labels: { [LABELS.job]: "list-a" } })))
    const b = await withDriver((d) => d.create(spec({ labels: { [LABELS.job]: "list-b" } })))
    const listed = await mine()
    const byId = new Map(listed.map((s) => [s.id, s]))
    expect(byId.get(a.id)).toEqual(a)
    expect(byId.get(b.id)).toEqual(b)
    expect(byId.get(a.id)?.labels[LABELS.job]).toBe("list-a")
    expect(byId.get(b.id)?.labels[LABELS.managed]).toBe("true")
    for (const id of [a.id, b.id]) await withDriver((d) => d.destroy(id))
  })

  it("fails with EngineUnavailable when no engine answers, as a typed error", async () => {
    const nowhere = new Dockerode({ socketPath: "/nonexistent/t1-docker.sock" })
    const program = Effect.gen(function* () {
      const driver = yield* makeDockerDriver({ ownerId: owner, docker: nowhere })
      return yield* Effect.all([
        Effect.flip(driver.create(spec())),
        Effect.flip(driver.list),
        Effect.flip(driver.exec("x", "true", quick)),
      ])
    })
    const errors = await Effect.runPromise(Effect.scoped(program))
    for (const error of errors) {
      expect(error._tag).toBe("EngineUnavailable")
      expect(error.errorClass).toBe("infra")
      expect(error.message).toContain("unix:///nonexistent/t1-docker.sock")
    }
  })
})

sandboxDriverContract(
  "docker",
  () => DockerDriverLive({ ownerId: owner, docker, interruptGraceMs: 1000 }),
  {
    baseSpec: spec({ cpus: 1, memoryMb: 512, pidsLimit: 0, labels: {} }),
    networkIsolation: true,
    pidsLimit: true,
    dockerSocketHidden: true,
    killFromOutside: async (id) => {
      await docker.getContainer(id).kill()
    },
    outsideKill: "SandboxDied",
  },
)
