/**
 * Escape attempts from an agent's sandbox, made as shell commands an agent could send, in
 * sandboxes created exactly as episodes get them: the sampler's own ports (`busPorts`) ask a
 * sandbox host on the driver under test (`startSandboxAndVerifier`, what `t1 up` and `t1 train
 * sft` run) for the spec the episode loop derives from a task (`sandboxSpecFor`). Every attempt
 * must fail. One suite for every driver: what differs is how the host sees a sandbox (docker
 * reads `docker inspect`, bwrap the sandbox's cgroups and uid map), given by an `EscapeView`
 * (sandbox-escape.test.ts, sandbox-escape-bwrap.test.ts). Connections go only to listeners this
 * test opens on this machine's own addresses.
 */
import { execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { networkInterfaces, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { create, type MessageInitShape } from "@bufbuild/protobuf"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startSandboxAndVerifier } from "../../actors/local.ts"
import { DONE_TOKEN, shellBlock } from "../../actors/sampler/actions/index.ts"
import { busPorts } from "../../actors/sampler/bus-ports.ts"
import { sandboxSpecFor } from "../../actors/sampler/episode.ts"
import { runEpisodeHere } from "../../actors/sampler/in-process.ts"
import { scriptedPolicy } from "../../actors/sampler/policy/scripted.ts"
import {
  firewallInstalled,
  installFirewall,
  removeFirewall,
} from "../../actors/sandbox/docker/firewall.ts"
import { CAPABILITIES, connectDocker } from "../../actors/sandbox/docker/index.ts"
import { DEFAULT_PIDS_LIMIT } from "../../actors/sandbox/driver.ts"
import { BASE_IMAGE, resolvedWireTask } from "../../actors/sandbox/image/index.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../../actors/sandbox/image/testing.ts"
import { TOOLCHAIN_ROOT } from "../../actors/sandbox/toolchain/index.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate } from "../../model/index.ts"
import {
  type EpisodeEnd,
  type EpisodeWorkItem,
  EpisodeWorkItemSchema,
  ResourceLimitsSchema,
  type Task,
  TaskRefSchema,
} from "../../proto/index.ts"
import { Bus, type BusShape, makeMemoryBus, subjectsFor } from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { loadTask } from "../../tasks/index.ts"
import { taskToWire } from "../../tasks/wire.ts"

/** `text` as one single-quoted shell word. */
export const q = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`

export interface ShellResult {
  readonly text: string
  readonly exitCode: number
  readonly timedOut: boolean
}

/** Runs a command in a sandbox's shell, as a turn's command runs. */
export type Shell = (id: string, command: string, timeoutMs?: number) => Promise<ShellResult>

/** A line of /proc/self/mountinfo. */
export interface Mount {
  readonly root: string
  readonly point: string
  readonly options: string
  readonly fstype: string
}

/** A sandbox's limits as the host set them. */
export interface SandboxLimits {
  readonly cpus: number
  readonly memoryBytes: number
  readonly pids: number
  /** Memory plus swap, where the driver sets that limit. */
  readonly memorySwapBytes?: number
}

/** What differs between drivers: how the host sees a sandbox, and what each one puts in it. */
export interface EscapeView {
  readonly driver: "docker" | "bwrap"
  /** The parts of two test names that say how each driver isolates networked sandboxes. */
  readonly titles: {
    readonly networkedIsolation: string
    readonly reachableAddresses: string
  }
  /** What `ls /sys/class/net` and /proc/net/dev list together in a sandbox without network. */
  readonly interfacesListed: ReadonlyArray<string>
  /** File system types with no host files behind them. */
  readonly virtualFs: ReadonlySet<string>
  /** Which mounts of host files the driver makes in sandbox `id` on purpose (toolchain aside). */
  readonly hostFiles: (id: string) => Promise<(m: Mount) => boolean>
  /** Host files the driver mounts read-only in every sandbox, which must stay unwritable. */
  readonly readOnlyHostFiles: ReadonlyArray<string>
  /**
   * Networked sandbox `c`'s address, after checking that it sits on the driver's sandbox network
   * (`d`: another networked sandbox).
   */
  readonly networkedAddress: (c: string, d: string, sh: Shell) => Promise<string>
  /** The bridge networked sandbox `id` is on, which the firewall guards, and its gateway. */
  readonly bridgeOf: (id: string) => Promise<{ bridge: string; gateway: string | undefined }>
  /** The `pid cmdline` line of the sandbox's PID 1. */
  readonly init: RegExp
  /** Checks, from the host's side where it can, that sandbox `id` is unprivileged. */
  readonly checkUnprivileged: (id: string, sh: Shell) => Promise<void>
  /** Sandbox `id`'s limits, read from the host. */
  readonly limits: (id: string) => Promise<SandboxLimits>
  /** Whether the driver limits memory plus swap to the memory limit (no swap). */
  readonly swapLimit: boolean
  /**
   * Where a fork bomb's process count is read: the sandbox's own cgroup file system, or the
   * host (for a sandbox without one).
   */
  readonly pidsCurrent: "in the sandbox" | ((id: string) => number)
}

/** A bundled task: its tests are six pytest cases over /app/top.txt and /app/stats.txt. */
const TASK_DIR = fileURLToPath(
  new URL("../../tasks/bundled/train/word-frequency-easy-s1-000", import.meta.url),
)

const docker = connectDocker()

/** Prints `<target> CONNECTED` or `<target> failed <errno>` for each host:port argument. */
const CONNECT_PY = `import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, int(port)))
        print(target, "CONNECTED")
    except OSError as e:
        print(target, "failed", e.errno or type(e).__name__)
    finally:
        s.close()
`

/** Every process the sandbox can see: `pid cmdline` per line. */
const PROCS_PY = `import os
for p in sorted((d for d in os.listdir("/proc") if d.isdigit()), key=int):
    try:
        cmd = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").replace(b"\\n", b" ")
        print(p, cmd.decode(errors="replace").strip())
    except OSError:
        pass
`

interface Listener {
  readonly address: string
  readonly port: number
  readonly server: Server
  readonly connections: () => number
}

/** A listener on `address`; undefined when `address` is not one of this machine's. */
const listen = (address: string) =>
  new Promise<Listener | undefined>((resolve) => {
    let count = 0
    const server = createServer((socket) => {
      count++
      socket.destroy()
    })
    server.once("error", () => resolve(undefined))
    server.listen(0, address, () => {
      const a = server.address()
      const port = typeof a === "object" && a !== null ? a.port : 0
      resolve({ address, port, server, connections: () => count })
    })
  })

/** This machine's IPv4 addresses: its interfaces, and the Docker bridge's gateway (docker0). */
const localAddresses = async (): Promise<{ all: string[]; bridge: string | undefined }> => {
  const all = new Set(["127.0.0.1"])
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === "IPv4") all.add(a.address)
  const bridgeNet = await docker
    .getNetwork("bridge")
    .inspect()
    .catch(() => undefined)
  const name: string = bridgeNet?.Options?.["com.docker.network.bridge.name"] ?? "docker0"
  // A bridge without containers is down, and Node lists only interfaces that are up.
  let bridge: string | undefined =
    bridgeNet?.IPAM?.Config?.[0]?.Gateway ??
    networkInterfaces()[name]?.find((a) => a.family === "IPv4")?.address
  if (bridge === undefined) {
    try {
      const out = execFileSync("ip", ["-o", "-4", "addr", "show", "dev", name], {
        encoding: "utf8",
      })
      bridge = /\binet (\d+\.\d+\.\d+\.\d+)/.exec(out)?.[1]
    } catch {
      bridge = undefined
    }
  }
  if (bridge !== undefined) all.add(bridge)
  return { all: [...all], bridge }
}

/** Registers the escape attempts against `view.driver`'s sandboxes, with their set-up. */
export const escapeSuite = (view: EscapeView): void => {
  const JOB = "security"
  const subjects = subjectsFor(`sec${randomBytes(3).toString("hex")}`)
  const decoder = new TextDecoder()
  const r = randomBytes(6).toString("hex")

  let scope: Scope.Closeable
  let bus: BusShape
  /** The sampler's ports to the sandbox hosts, for commands and clean-up. */
  let ports: ReturnType<typeof busPorts>
  let task: Task
  let solution: string
  const sandboxes: string[] = []

  const workItem = (
    episodeId: string,
    changes: {
      readonly resources?: MessageInitShape<typeof ResourceLimitsSchema>
      readonly allowInternet?: boolean
    } = {},
  ) =>
    create(EpisodeWorkItemSchema, {
      jobId: JOB,
      episodeId,
      task: {
        ...task,
        ...(changes.resources === undefined
          ? {}
          : { resources: create(ResourceLimitsSchema, changes.resources) }),
        ...(changes.allowInternet === undefined ? {} : { allowInternet: changes.allowInternet }),
      },
      taskRef: { taskSet: task.taskSet, taskId: task.id },
      sampling: { temperature: 1, topP: 1, maxTokens: 8192 },
      limits: { maxTurns: 6, maxTokens: 65_536, commandTimeoutMs: 20_000, wallClockSec: 120 },
      admittedUnixMs: BigInt(Date.now()),
    })

  /** A sandbox for `item` as the episode loop asks for it; destroyed after the file. */
  const sandboxFor = async (item: EpisodeWorkItem): Promise<string> => {
    const id = await Effect.runPromise(
      ports.createSandbox(
        sandboxSpecFor(item.task as Task, item, 0),
        `${item.jobId}:${item.episodeId}:0`,
      ),
    )
    sandboxes.push(id)
    return id
  }

  /** Runs `command` in the sandbox's shell, as a turn's command runs. */
  const sh: Shell = async (id, command, timeoutMs = 15_000) => {
    const result = await Effect.runPromise(
      ports.exec(id, command, { timeoutMs, maxOutputBytes: 256 * 1024 }),
    )
    return {
      text: decoder.decode(result.output),
      exitCode: result.exitCode,
      timedOut: result.timedOut,
    }
  }

  /** Opens a TCP connection from sandbox `id` to each host:port (see CONNECT_PY). */
  const connectFrom = (id: string, targets: ReadonlyArray<string>) =>
    sh(id, `python3 -c ${q(CONNECT_PY)} ${targets.map(q).join(" ")}`, 30_000)

  /** The limits `view.limits` must read for a spec of `cpus`, `memoryMb` and `pids`. */
  const limitsOf = (cpus: number, memoryMb: number, pids: number): SandboxLimits => {
    const memoryBytes = memoryMb * 1024 * 1024
    return { cpus, memoryBytes, pids, ...(view.swapLimit ? { memorySwapBytes: memoryBytes } : {}) }
  }

  /** The most processes sandbox `id` holds in the 3 s after a fork bomb starts in it. */
  const forkBombPeak = async (id: string): Promise<number> => {
    const pidsCurrent = view.pidsCurrent
    if (pidsCurrent === "in the sandbox") {
      // Watched from the same shell with builtins only (no process slot needed).
      const bomb = [
        "F=/sys/fs/cgroup/pids/pids.current; [ -r $F ] || F=/sys/fs/cgroup/pids.current",
        "max=0; bomb() { bomb | bomb & }; bomb 2>/dev/null &",
        "end=$((SECONDS + 3))",
        'while [ $SECONDS -lt $end ]; do read n < $F; [ "$n" -gt "$max" ] && max=$n; done',
        "echo max=$max",
      ].join("\n")
      const watched = await sh(id, bomb, 20_000)
      return Number(/max=(\d+)/.exec(watched.text)?.[1])
    }
    // Watched from the host: the sandbox has no cgroup file system.
    await sh(id, "bomb() { bomb | bomb & }; bomb 2>/dev/null &", 20_000)
    let max = 0
    const end = Date.now() + 3000
    while (Date.now() < end) {
      max = Math.max(max, pidsCurrent(id))
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    return max
  }

  beforeAll(async () => {
    await ensureTestBaseImage()
    const loaded = await Effect.runPromise(loadTask(TASK_DIR))
    task = await Effect.runPromise(taskToWire(loaded, BASE_IMAGE))
    solution = readFileSync(join(TASK_DIR, "solution", "solve.sh"), "utf8")
    scope = await Effect.runPromise(Scope.make())
    const metrics = makeMetrics({ defaultMetrics: false })
    bus = await Effect.runPromise(Scope.provide(scope)(makeMemoryBus()))
    ports = busPorts(bus, subjects, { jobId: JOB, episodeId: "probe", attempt: 0 })
    await Effect.runPromise(
      Effect.gen(function* () {
        yield* ensureSamplerStreams(bus, subjects)
        yield* startSandboxAndVerifier(subjects, { concurrency: 2, driver: view.driver })
      }).pipe(
        Effect.provideService(Bus, bus),
        Effect.provideService(Metrics, metrics),
        Scope.provide(scope),
      ),
    )
  }, BASE_IMAGE_TIMEOUT_MS)

  afterAll(async () => {
    if (bus !== undefined)
      await Effect.runPromise(
        Effect.forEach(sandboxes, (id) => ports.destroySandbox(id), {
          concurrency: 4,
        }),
      )
    if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  }, 60_000)

  describe(`sandbox escape attempts (${view.driver} driver, episode sandboxes)`, () => {
    let a: string
    let b: string
    beforeAll(async () => {
      ;[a, b] = await Promise.all([sandboxFor(workItem("a")), sandboxFor(workItem("b"))])
    }, 60_000)

    it("network: only loopback; this machine's listeners (127.0.0.1, the bridge gateway) are unreachable", async () => {
      const { all, bridge } = await localAddresses()
      const listeners = (await Promise.all(all.map(listen))).filter(
        (l): l is Listener => l !== undefined,
      )
      try {
        const addresses = listeners.map((l) => l.address)
        expect(addresses).toContain("127.0.0.1")
        // The engine is this machine's (a unix socket), so its bridge gateway is one of our addresses.
        if (bridge !== undefined && !(process.env.DOCKER_HOST ?? "").startsWith("tcp:"))
          expect(addresses).toContain(bridge)
        const interfaces = await sh(
          a,
          "ls /sys/class/net 2>/dev/null; tail -n +3 /proc/net/dev | cut -d: -f1",
        )
        expect(interfaces.text.split(/\s+/).filter((s) => s !== "")).toEqual(view.interfacesListed)
        const attempt = await connectFrom(
          a,
          listeners.map((l) => `${l.address}:${l.port}`),
        )
        const lines = attempt.text.trim().split("\n")
        expect(lines).toHaveLength(listeners.length)
        for (const line of lines) expect(line).toMatch(/ failed \w+$/)
        for (const l of listeners) expect(l.connections()).toBe(0)
      } finally {
        for (const l of listeners) l.server.close()
      }
    })

    it("docker: no engine socket anywhere, no DOCKER_HOST, no engine API over a unix socket", async () => {
      const found = await sh(
        a,
        [
          "ls -l /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock 2>&1",
          "printenv DOCKER_HOST || echo DOCKER_HOST=unset",
          "echo sockets:; find / -xdev -type s 2>/dev/null; echo end",
        ].join("; "),
      )
      expect(found.text).not.toMatch(/^s[rwx-]{9}/m)
      expect(found.text).toContain("DOCKER_HOST=unset")
      expect(found.text).toMatch(/sockets:\nend/)
      const api = await sh(
        a,
        `python3 -c ${q(`import socket
for path in ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path); s.sendall(b"GET /version HTTP/1.0\\r\\n\\r\\n"); print(path, "ANSWERED", s.recv(64))
    except OSError as e:
        print(path, "failed", e.errno)
`)}`,
      )
      expect(api.text).not.toContain("ANSWERED")
      expect(api.text.trim().split("\n")).toHaveLength(3)
    })

    it("host filesystem: a host file is invisible, no host path is mounted, read-only paths stay read-only", async () => {
      const dir = mkdtempSync(join(tmpdir(), "t1-escape-"))
      const secret = `t1-host-secret-${r}`
      const marker = join(dir, "marker.txt")
      writeFileSync(marker, secret)
      try {
        const look = await sh(
          a,
          `test -e ${q(marker)} && echo VISIBLE; test -e ${q(dir)} && echo DIR-VISIBLE; grep -rls ${q(secret)} /tmp /var/tmp /root /home /app /mnt /srv /opt 2>/dev/null; echo done`,
        )
        expect(look.text).toBe("done\n")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }

      const hostFile = await view.hostFiles(a)
      const mountinfo = (await sh(a, "cat /proc/self/mountinfo")).text.trim().split("\n")
      const mounts = mountinfo.map((line) => {
        const [left = "", right = ""] = line.split(" - ")
        const f = left.split(" ")
        const [fstype = ""] = right.split(" ")
        return { root: f[3] ?? "", point: f[4] ?? "", options: f[5] ?? "", fstype }
      })
      expect(mounts.find((m) => m.point === "/")?.fstype).toBe("overlay")
      for (const m of mounts) {
        if (m.point === "/" || view.virtualFs.has(m.fstype)) continue
        // Of the host's file systems: what the driver puts there on purpose, and the verifier's
        // toolchain (the base image's programs), read-only.
        const intended =
          hostFile(m) || (m.point === TOOLCHAIN_ROOT && m.options.split(",").includes("ro"))
        expect({ ...m, intended }).toMatchObject({ intended: true })
      }
      const points = mounts.map((m) => m.point)
      for (const forbidden of ["/app", "/tests", "/logs", "/var/run/docker.sock", "/run", "/tmp"])
        expect(points).not.toContain(forbidden)

      const writes = await sh(
        a,
        [
          "echo x > /proc/sys/kernel/hostname",
          "echo 3 > /proc/sys/vm/drop_caches",
          "touch /sys/kernel/t1",
          "touch /sys/fs/cgroup/pids/t1",
          ...view.readOnlyHostFiles.map((f) => `touch ${f}`),
          `touch ${TOOLCHAIN_ROOT}/bin/t1`,
          `rm -f ${TOOLCHAIN_ROOT}/bin/python3`,
          `mount -o remount,rw ${TOOLCHAIN_ROOT}`,
          `umount -l ${TOOLCHAIN_ROOT}`,
          "mount -o remount,rw /sys",
          "mount -o remount,rw /proc/sys",
        ]
          .map((c) => `(${c}) 2>/dev/null && echo WROTE: ${q(c)}`)
          .join("; ")
          .concat("; echo checked"),
      )
      expect(writes.text).toBe("checked\n")
    })

    it("another sandbox: its files, processes, shared memory and loopback listeners are out of reach", async () => {
      const port = 20_000 + (Number.parseInt(r.slice(0, 4), 16) % 20_000)
      const made = await sh(
        a,
        [
          `echo secret > /tmp/t1-secret-${r}`,
          `echo secret > /dev/shm/t1-shm-${r}`,
          `(exec -a t1-marker-${r} sleep 300) >/dev/null 2>&1 &`,
          `python3 -c ${q(`import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", ${port})); s.listen(8); time.sleep(300)`)} >/dev/null 2>&1 &`,
          "sleep 0.5",
        ].join("\n"),
      )
      expect(made).toMatchObject({ exitCode: 0 })
      // The listener answers inside its own sandbox (so the refusal below means something).
      expect((await connectFrom(a, [`127.0.0.1:${port}`])).text).toContain("CONNECTED")
      expect((await sh(a, `python3 -c ${q(PROCS_PY)}`)).text).toContain(`t1-marker-${r}`)

      const look = await sh(
        b,
        `test -e /tmp/t1-secret-${r} && echo FILE; test -e /dev/shm/t1-shm-${r} && echo SHM; echo done`,
      )
      expect(look.text).toBe("done\n")
      const procs = await sh(b, `python3 -c ${q(PROCS_PY)}`)
      expect(procs.text).not.toContain(`t1-marker-${r}`)
      const reach = await connectFrom(b, [`127.0.0.1:${port}`])
      expect(reach.text).toMatch(/ failed \w+\n$/)
      const names = await sh(b, "hostname; cat /proc/sys/kernel/hostname")
      expect(names.text).not.toContain(a.slice(0, 12))
    })

    it(`another sandbox with network allowed: still unreachable (${view.titles.networkedIsolation}, no traffic between sandboxes)`, async () => {
      const [c, d] = await Promise.all([
        sandboxFor(workItem("net-c", { allowInternet: true })),
        sandboxFor(workItem("net-d", { allowInternet: true })),
      ])
      const ip = await view.networkedAddress(c, d, sh)
      expect(ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
      const port = 20_000 + (Number.parseInt(r.slice(4, 8), 16) % 20_000)
      await sh(
        c,
        `python3 -c ${q(`import socket, time
s = socket.socket(); s.bind(("0.0.0.0", ${port})); s.listen(8); time.sleep(300)`)} >/dev/null 2>&1 &\nsleep 0.5`,
      )
      expect((await connectFrom(c, [`${ip}:${port}`])).text).toContain("CONNECTED")
      expect((await connectFrom(d, [`${ip}:${port}`])).text).toMatch(/ failed \w+\n$/)
    })

    it(`network allowed: nothing on this machine is reachable (${view.titles.reachableAddresses}), and the firewall is what stops it`, async () => {
      const c = await sandboxFor(workItem("net-fw", { allowInternet: true }))
      const { bridge, gateway } = await view.bridgeOf(c)
      expect(gateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
      expect(await Effect.runPromise(firewallInstalled(bridge))).toBe(true)
      const { all } = await localAddresses()
      // The sandbox's own 127.0.0.1 is its own loopback: every other address is this machine's.
      const targets = [...new Set([...all.filter((a) => a !== "127.0.0.1"), gateway as string])]
      const listeners = (await Promise.all(targets.map(listen))).filter(
        (l): l is Listener => l !== undefined,
      )
      try {
        expect(listeners.map((l) => l.address)).toContain(gateway)
        const endpoints = listeners.map((l) => `${l.address}:${l.port}`)
        const blocked = (await connectFrom(c, endpoints)).text.trim().split("\n")
        expect(blocked).toHaveLength(listeners.length)
        for (const line of blocked) expect(line).toMatch(/ failed \w+$/)
        for (const l of listeners) expect(l.connections()).toBe(0)
        // Without the rules the same sandbox reaches them: the firewall is what stops it.
        await Effect.runPromise(removeFirewall(bridge))
        try {
          const open = (await connectFrom(c, endpoints)).text
          expect(open).toContain(
            `${gateway}:${listeners.find((l) => l.address === gateway)?.port} CONNECTED`,
          )
        } finally {
          await Effect.runPromise(installFirewall(bridge))
        }
        expect(await Effect.runPromise(firewallInstalled(bridge))).toBe(true)
      } finally {
        for (const l of listeners) l.server.close()
      }
    })

    it("host processes and privileges: only the sandbox's processes, no CAP_SYS_ADMIN, not privileged", async () => {
      const marker = `t1-host-process-${r}`
      const hostProcess = spawn("sleep", ["60"], { argv0: marker, stdio: "ignore" })
      try {
        const procs = (await sh(a, `python3 -c ${q(PROCS_PY)}`)).text.trim().split("\n")
        expect(procs[0]).toMatch(view.init)
        expect(procs.length).toBeLessThan(40)
        for (const line of procs) {
          expect(line).not.toContain(marker)
          expect(line).not.toMatch(/vitest|dockerd|containerd|\bnode\b/)
        }
        // The test's own pid names some other process, or none, inside.
        const self = await sh(
          a,
          `cat /proc/${process.pid}/cmdline 2>/dev/null | tr '\\0' ' '; echo`,
        )
        expect(self.text).not.toMatch(/vitest|node/)
      } finally {
        hostProcess.kill("SIGKILL")
      }

      const status = (
        await sh(a, "grep -E '^(Cap(Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status")
      ).text
      const field = (name: string) => new RegExp(`^${name}:\\s*(\\S+)`, "m").exec(status)?.[1] ?? ""
      const BITS: Readonly<Record<string, number>> = {
        CHOWN: 0,
        DAC_OVERRIDE: 1,
        FOWNER: 3,
        KILL: 5,
        SETGID: 6,
        SETUID: 7,
      }
      const mask = CAPABILITIES.reduce((m, c) => m | (1n << BigInt(BITS[c] ?? 63)), 0n)
      const SYS_ADMIN = 1n << 21n
      for (const name of ["CapPrm", "CapEff", "CapBnd"]) {
        const value = BigInt(`0x${field(name)}`)
        expect(value).toBe(mask)
        expect(value & SYS_ADMIN).toBe(0n)
      }
      expect(BigInt(`0x${field("CapAmb")}`)).toBe(0n)
      expect(field("NoNewPrivs")).toBe("1")
      expect(field("Seccomp")).toBe("2")

      const attempts = await sh(
        a,
        [
          "mount -t tmpfs none /mnt",
          "mount --bind /proc /mnt",
          "unshare --user --map-root-user true",
          "unshare --mount true",
          "mknod /tmp/t1-disk b 8 0",
          "chroot / true",
          "echo 0 > /proc/sys/kernel/randomize_va_space",
          "test -e /dev/kmsg -o -e /dev/mem -o -e /dev/sda -o -e /dev/vda",
        ]
          .map((c) => `(${c}) >/dev/null 2>&1 && echo DID: ${q(c)}`)
          .join("; ")
          .concat("; echo checked"),
      )
      expect(attempts.text).toBe("checked\n")
      await view.checkUnprivileged(a, sh)
    })

    it("resource limits: memory, CPU and pids are set; a fork bomb and a memory hog are contained", async () => {
      // The task's own limits (task.json: 1 CPU, 1024 MiB), the default pids limit, and no swap
      // where the driver limits it.
      expect([task.resources?.cpus, task.resources?.memoryMb]).toEqual([1, 1024])
      expect(await view.limits(a)).toEqual(limitsOf(1, 1024, DEFAULT_PIDS_LIMIT))

      const small = await sandboxFor(
        workItem("bomb", { resources: { cpus: 0.5, memoryMb: 128, pids: 48 } }),
      )
      expect(await view.limits(small)).toEqual(limitsOf(0.5, 128, 48))
      // 512 MiB in a 128 MiB sandbox: the kernel kills the hog, the shell carries on.
      const hog = await sh(
        small,
        `python3 -c 'b = b"x" * (512 * 1024 * 1024)'; echo exit=$?`,
        20_000,
      )
      expect(hog.text).toMatch(/exit=(137|1)\n$/)
      // A fork bomb: the sandbox's process count climbs to the limit and stops there, while the
      // host's event loop keeps its pace.
      let worstLagMs = 0
      let last = Date.now()
      const ticker = setInterval(() => {
        worstLagMs = Math.max(worstLagMs, Date.now() - last - 50)
        last = Date.now()
      }, 50)
      try {
        const max = await forkBombPeak(small)
        expect(max).toBeGreaterThanOrEqual(40)
        expect(max).toBeLessThanOrEqual(48)
        // The bomb still holds every slot; the shell answers with a builtin, other sandboxes as usual.
        expect((await sh(small, "echo ok", 10_000)).text).toMatch(/(^|\n)ok\n$/)
        expect((await sh(a, "echo fine", 10_000)).text).toBe("fine\n")
      } finally {
        clearInterval(ticker)
        // The bomb would keep half a CPU busy for the rest of the file.
        await Effect.runPromise(ports.destroySandbox(small))
      }
      expect(worstLagMs).toBeLessThan(2000)
    })
  })

  describe("verifier results: an agent cannot write its own reward", () => {
    const tokenizer = loadBundledTokenizer()
    const template = new ChatTemplate(tokenizer)
    /** Runs a real episode (sampler loop, sandbox, verifier) whose agent sends `turns`. */
    const episode = (episodeId: string, turns: ReadonlyArray<string>): Promise<EpisodeEnd> => {
      const item = workItem(episodeId)
      const policy = scriptedPolicy(tokenizer, () => turns)
      return Effect.runPromise(
        runEpisodeHere(bus, subjects, item, { policy, template, format: shellBlock }),
      )
    }
    const block = (script: string) => [`\`\`\`bash\n${script}\n\`\`\``, DONE_TOKEN]
    const TESTS = [
      "test_top_has_the_right_words",
      "test_top_counts_are_right",
      "test_top_is_ordered",
      "test_stats_lines",
      "test_stats_words",
      "test_stats_unique",
    ]
    const fakeJunit = `<testsuites><testsuite name="pytest" tests="6">${TESTS.map((t) => `<testcase classname="test_outputs" name="${t}" file="test_outputs.py"/>`).join("")}</testsuite></testsuites>`
    const fakeCtrf = JSON.stringify({
      results: { tests: TESTS.map((name) => ({ name, status: "passed", duration: 1 })) },
    })
    const FORCE_PASS = `import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
`

    it("the genuine reward stands after results, reports, tests, configs and variables were planted", async () => {
      const forge = [
        "set +e",
        // result files where script verifiers and the pytest report would be read
        "mkdir -p /logs/verifier /tests /tmp/t1-verify-0000000000000000",
        "echo 6 > /logs/verifier/reward.txt",
        `printf '%s' ${q(fakeCtrf)} > /logs/verifier/ctrf.json`,
        `printf '%s' ${q(fakeCtrf)} > /logs/verifier/reward.json`,
        `printf '%s' ${q(fakeJunit)} > /tmp/t1-verify-0000000000000000/report.xml`,
        "cp /tmp/t1-verify-0000000000000000/report.xml /tmp/report.xml",
        // tests of its own, and hooks that pass every test wherever pytest might look
        `printf 'def test_top_is_ordered():\\n    pass\\n' > /tests/test_outputs.py`,
        `printf '%s' ${q(FORCE_PASS)} > /tests/conftest.py`,
        "cp /tests/conftest.py /app/conftest.py",
        "cp /tests/conftest.py /conftest.py",
        `printf '[pytest]\\naddopts = -p no:junitxml\\n' > /app/pytest.ini`,
        // the shell the verifier's commands run in
        "export PYTEST_ADDOPTS='--collect-only -p no:junitxml'",
        "export PYTEST_PLUGINS=conftest",
        "python3() { echo '6 passed'; }",
        "export -f python3",
        "alias python3='echo 6 passed'",
        // a fake summary in the agent's own output (the verifier reads only its own run)
        ...TESTS.map((t) => `echo PASSED ../tests/test_outputs.py::${t}`),
        // a python3 that writes a passing report, and a process left to rewrite the uploaded
        // tests: the sandbox host runs the verifier's commands with the read-only toolchain, as
        // separate processes, after stopping the agent's (test/security/verifier-forgery.test.ts)
        `printf '%s\\n' '#!/bin/bash' ${q(`for a in "$@"; do case $a in --junitxml=*) printf '%s' '${fakeJunit}' > "\${a#--junitxml=}";; esac; done; echo "6 passed"`)} > /usr/local/bin/python3`,
        "chmod +x /usr/local/bin/python3",
        `nohup setsid bash -c ${q(`while true; do for f in /tests/test_*.py; do [ -f "$f" ] && printf 'def test_top_is_ordered():\\n    pass\\n' > "$f"; done; sleep 0.005; done`)} >/dev/null 2>&1 &`,
      ].join("\n")
      const [forged, honest] = await Promise.all([
        episode("forger", block(forge)),
        episode("oracle", shellBlock.renderSolution(solution)),
      ])
      expect(honest.infraFailed).toBe(false)
      expect([honest.testsPassed, honest.testsTotal, honest.resolved]).toEqual([6, 6, true])
      expect(forged.infraFailed).toBe(false)
      expect([forged.testsPassed, forged.testsTotal, forged.reward, forged.resolved]).toEqual([
        0,
        6,
        0,
        false,
      ])
      expect(forged.tests.map((t) => t.name.split("::").at(-1)).sort()).toEqual([...TESTS].sort())
    }, 90_000)

    /**
     * `python3 -m pytest` would put the workdir first on sys.path, so a pytest.py the agent left
     * in /app would replace pytest and write any report it liked; the verifier starts pytest with
     * the workdir after the installed packages.
     */
    it("a pytest.py the agent leaves in the workdir cannot stand in for pytest", async () => {
      const shadow = `import sys
args = sys.argv[1:]
report = next(a.split("=", 1)[1] for a in args if a.startswith("--junitxml="))
open(report, "w").write(${JSON.stringify(fakeJunit)})
print("${TESTS.map((t) => `PASSED ../tests/test_outputs.py::${t}`).join("\\n")}")
print("6 passed in 0.01s")
`
      const end = await episode("shadow", block(`printf '%s' ${q(shadow)} > /app/pytest.py`))
      expect(end.infraFailed).toBe(false)
      expect([end.testsPassed, end.reward, end.resolved]).toEqual([0, 0, false])
    }, 60_000)
  })

  /**
   * A real-shape Terminal-Bench 2 task whose test.sh bootstraps curl and uv over the network and
   * runs `uvx … pytest --ctrf …`: the verifier runs it rewritten (bootstrap removed, pytest calls on
   * the sandbox's pytest with a JUnit report in its private scratch directory). The script itself
   * writes reward.txt and the ctrf report names a file in /logs/verifier: on this path neither is
   * read, and what the agent plants where they or t1's report would be changes nothing.
   */
  describe("verifier results on the rewritten test-script path: an agent cannot write its own reward", () => {
    const REGION_TASK = fileURLToPath(
      new URL("../../tasks/fixtures/shapes/region-totals", import.meta.url),
    )
    const REGIONS = ["north", "south", "east", "west", "central"]
    const TOTALS: Readonly<Record<string, number>> = {
      north: 150,
      south: 100,
      east: 400,
      west: 42,
      central: 20,
    }
    let region: Task
    beforeAll(async () => {
      region = await Effect.runPromise(Effect.flatMap(loadTask(REGION_TASK), resolvedWireTask))
    }, BASE_IMAGE_TIMEOUT_MS)

    const tokenizer = loadBundledTokenizer()
    const template = new ChatTemplate(tokenizer)
    const episode = (episodeId: string, script: string): Promise<EpisodeEnd> => {
      const item = workItem(episodeId)
      item.task = region
      item.taskRef = create(TaskRefSchema, { taskSet: region.taskSet, taskId: region.id })
      const policy = scriptedPolicy(tokenizer, () => [`\`\`\`bash\n${script}\n\`\`\``, DONE_TOKEN])
      return Effect.runPromise(
        runEpisodeHere(bus, subjects, item, { policy, template, format: shellBlock }),
      )
    }
    const names = REGIONS.map((r) => `test_${r}`)
    const fakeJunit = `<testsuites><testsuite name="pytest" tests="5">${names.map((t) => `<testcase classname="test_outputs" name="${t}" file="test_outputs.py"/>`).join("")}</testsuite></testsuites>`
    const fakeCtrf = JSON.stringify({
      results: { tests: names.map((name) => ({ name, status: "passed", duration: 1 })) },
    })
    const FORCE_PASS = `import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
`
    const SHADOW = `import sys
for a in sys.argv[1:]:
    if a.startswith("--junitxml="):
        open(a.split("=", 1)[1], "w").write(${JSON.stringify(fakeJunit)})
print("5 passed in 0.01s")
`

    it("planted reward files, ctrf and JUnit reports, conftest/ini files, a pytest.py, uv/uvx stand-ins and variables change nothing", async () => {
      const twoRight = `mkdir -p /app/totals && echo 150 > /app/totals/north.txt && echo 100 > /app/totals/south.txt`
      const forge = [
        "set +e",
        twoRight,
        "mkdir -p /logs/verifier /tests /root/.local/bin",
        "echo 1 > /logs/verifier/reward.txt",
        `printf '%s' ${q(fakeCtrf)} > /logs/verifier/ctrf.json`,
        // guesses at t1's scratch directory and report names
        ...["0000000000000000", "ffffffffffffffff"].map(
          (n) =>
            `mkdir -p /tmp/t1-verify-${n} && printf '%s' ${q(fakeJunit)} > /tmp/t1-verify-${n}/report-0.xml`,
        ),
        // hooks and configs wherever pytest might look, and a pytest.py in the workdir
        `printf '%s' ${q(FORCE_PASS)} > /conftest.py`,
        "cp /conftest.py /app/conftest.py && cp /conftest.py /tests/conftest.py",
        `printf '[pytest]\\naddopts = -p no:junitxml\\n' > /pytest.ini`,
        "cp /pytest.ini /app/pytest.ini",
        `printf '%s' ${q(SHADOW)} > /app/pytest.py`,
        // the tools the original script would have fetched, pre-installed by the agent
        `printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /root/.local/bin/uvx`,
        "cp /root/.local/bin/uvx /root/.local/bin/uv && chmod +x /root/.local/bin/uv*",
        `printf 'export PATH=/root/.local/bin:$PATH\\n' > /root/.local/bin/env`,
        "export PYTEST_ADDOPTS='-p no:junitxml' PYTEST_PLUGINS=conftest",
      ].join("\n")
      const honestWork = `mkdir -p /app/totals && ${REGIONS.map((r) => `echo ${TOTALS[r]} > /app/totals/${r}.txt`).join(" && ")}`
      const [forged, honest] = await Promise.all([
        episode("rewritten-forger", forge),
        episode("rewritten-honest", honestWork),
      ])
      expect(honest.infraFailed).toBe(false)
      expect([honest.testsPassed, honest.testsTotal, honest.resolved]).toEqual([5, 5, true])
      expect(forged.infraFailed || forged.unverifiable).toBe(false)
      expect([forged.testsPassed, forged.testsTotal, forged.reward, forged.resolved]).toEqual([
        2,
        5,
        2,
        false,
      ])
      expect(forged.tests.map((t) => t.name.split("::").at(-1)).sort()).toEqual([...names].sort())
    }, 120_000)
  })
}
