import { mkdir, readFile, rmdir, writeFile } from "node:fs/promises"
import { join } from "node:path"

/**
 * Per-sandbox cgroups: the one place the local driver can really enforce pidsLimit (RLIMIT_NPROC
 * counts every process of the uid, and root ignores it) and memory. Children are created below
 * the cgroup this process already lives in, so outer limits (a CI job's) still apply.
 */
export interface CgroupSupport {
  readonly version: 1 | 2
  /** Where each controller's sandbox cgroups are created. */
  readonly parents: { readonly pids: string; readonly memory?: string; readonly cpu?: string }
}

export interface CgroupLimits {
  readonly pids: number
  /** 0 = none. */
  readonly memoryBytes: number
  /** 0 = none. */
  readonly cpus: number
}

interface Mount {
  readonly root: string
  readonly mountPoint: string
  readonly fsType: string
  readonly superOptions: ReadonlyArray<string>
}

const unescapeMountPath = (s: string) =>
  s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)))

const parseMountInfo = (text: string): Mount[] =>
  text
    .split("\n")
    .filter(Boolean)
    .flatMap((line) => {
      const [left, right] = line.split(" - ")
      if (left === undefined || right === undefined) return []
      const l = left.split(" ")
      const r = right.split(" ")
      const [root, mountPoint, fsType, superOptions] = [l[3], l[4], r[0], r[2]]
      if (!root || !mountPoint || !fsType || superOptions === undefined) return []
      return [
        {
          root: unescapeMountPath(root),
          mountPoint: unescapeMountPath(mountPoint),
          fsType,
          superOptions: superOptions.split(","),
        },
      ]
    })

/** `controller` (or "" for the v2 hierarchy) → this process's cgroup path. */
const parseProcCgroup = (text: string): Map<string, string> => {
  const paths = new Map<string, string>()
  for (const line of text.split("\n").filter(Boolean)) {
    const [, controllers, ...path] = line.split(":")
    if (controllers === undefined) continue
    for (const c of controllers.split(",")) paths.set(c, path.join(":"))
  }
  return paths
}

const dirOf = (mount: Mount, path: string): string => {
  const relative = path.startsWith(mount.root) ? path.slice(mount.root.length) : path
  return join(mount.mountPoint, relative)
}

/** Whether a child cgroup can be created (and removed) under `parent`. */
const canCreateChild = async (parent: string): Promise<boolean> => {
  const probe = join(parent, `t1-probe-${process.pid}-${Math.random().toString(36).slice(2)}`)
  try {
    await mkdir(probe)
    await rmdir(probe)
    return true
  } catch {
    return false
  }
}

const probeV1 = async (mounts: Mount[], own: Map<string, string>) => {
  const parent = async (controller: string) => {
    const mount = mounts.find((m) => m.fsType === "cgroup" && m.superOptions.includes(controller))
    const path = own.get(controller)
    if (mount === undefined || path === undefined) return undefined
    const dir = dirOf(mount, path)
    return (await canCreateChild(dir)) ? dir : undefined
  }
  const pids = await parent("pids")
  if (pids === undefined) return undefined
  const memory = await parent("memory")
  const cpu = await parent("cpu")
  return { version: 1, parents: { pids, memory, cpu } } satisfies CgroupSupport
}

const probeV2 = async (mounts: Mount[], own: Map<string, string>) => {
  const mount = mounts.find((m) => m.fsType === "cgroup2")
  const path = own.get("")
  if (mount === undefined || path === undefined) return undefined
  const dir = dirOf(mount, path)
  const enabled = async () =>
    (await readFile(join(dir, "cgroup.subtree_control"), "utf8").catch(() => "")).split(/\s+/)
  let controllers = await enabled()
  if (!controllers.includes("pids")) {
    // Works where this cgroup may delegate (the root cgroup, or a delegated subtree).
    for (const c of ["pids", "memory", "cpu"])
      await writeFile(join(dir, "cgroup.subtree_control"), `+${c}`).catch(() => undefined)
    controllers = await enabled()
  }
  if (!controllers.includes("pids") || !(await canCreateChild(dir))) return undefined
  return {
    version: 2,
    parents: {
      pids: dir,
      memory: controllers.includes("memory") ? dir : undefined,
      cpu: controllers.includes("cpu") ? dir : undefined,
    },
  } satisfies CgroupSupport
}

/** The cgroup support of this host for this process, or undefined (not root, no pids controller). */
export const probeCgroups = async (): Promise<CgroupSupport | undefined> => {
  try {
    const mounts = parseMountInfo(await readFile("/proc/self/mountinfo", "utf8"))
    const own = parseProcCgroup(await readFile("/proc/self/cgroup", "utf8"))
    return (await probeV1(mounts, own)) ?? (await probeV2(mounts, own))
  } catch {
    return undefined
  }
}

const write = (dir: string, file: string, value: string, required: boolean) =>
  writeFile(join(dir, file), value).catch((e: unknown) => {
    if (required) throw e
  })

/**
 * Creates cgroup `name` under each controller's parent and applies the limits; returns the
 * directories made (a process joins by writing its pid to each one's cgroup.procs).
 */
export const createCgroups = async (
  support: CgroupSupport,
  name: string,
  limits: CgroupLimits,
): Promise<ReadonlyArray<string>> => {
  const dirs = [
    ...new Set(
      [support.parents.pids, support.parents.memory, support.parents.cpu].filter(
        (d): d is string => d !== undefined,
      ),
    ),
  ].map((parent) => join(parent, name))
  for (const dir of dirs) await mkdir(dir)
  const pidsDir = join(support.parents.pids, name)
  const memoryDir = support.parents.memory && join(support.parents.memory, name)
  const cpuDir = support.parents.cpu && join(support.parents.cpu, name)
  await write(pidsDir, "pids.max", String(limits.pids), true)
  if (support.version === 1) {
    if (memoryDir && limits.memoryBytes > 0) {
      await write(memoryDir, "memory.limit_in_bytes", String(limits.memoryBytes), true)
      await write(memoryDir, "memory.memsw.limit_in_bytes", String(limits.memoryBytes), false)
    }
    if (cpuDir && limits.cpus > 0) {
      await write(cpuDir, "cpu.cfs_period_us", "100000", false)
      await write(cpuDir, "cpu.cfs_quota_us", String(Math.round(limits.cpus * 100_000)), false)
    }
  } else {
    if (memoryDir && limits.memoryBytes > 0) {
      await write(memoryDir, "memory.max", String(limits.memoryBytes), true)
      await write(memoryDir, "memory.swap.max", "0", false)
    }
    if (cpuDir && limits.cpus > 0)
      await write(cpuDir, "cpu.max", `${Math.round(limits.cpus * 100_000)} 100000`, false)
  }
  return dirs
}

const pidsIn = async (dir: string): Promise<number[]> =>
  (await readFile(join(dir, "cgroup.procs"), "utf8").catch(() => ""))
    .split("\n")
    .filter(Boolean)
    .map(Number)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** SIGKILLs every process in the cgroups until they are empty (a fork bomb included). */
export const killCgroups = async (dirs: ReadonlyArray<string>): Promise<void> => {
  for (let round = 0; round < 100; round++) {
    let alive = 0
    for (const dir of dirs) {
      await writeFile(join(dir, "cgroup.kill"), "1").catch(() => undefined)
      for (const pid of await pidsIn(dir)) {
        alive++
        try {
          process.kill(pid, "SIGKILL")
        } catch {}
      }
    }
    if (alive === 0) return
    await sleep(round < 10 ? 5 : 20)
  }
}

/** Kills what is left and removes the cgroups; missing ones are fine. */
export const removeCgroups = async (dirs: ReadonlyArray<string>): Promise<void> => {
  await killCgroups(dirs)
  for (const dir of dirs) {
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        await rmdir(dir)
        break
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") break
        await sleep(20)
      }
    }
  }
}
