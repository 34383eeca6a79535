import type Dockerode from "dockerode"
import { DEFAULT_PIDS_LIMIT, LABELS, type SandboxSpec } from "../driver.ts"
import { InvalidSandboxSpec } from "../errors.ts"
import { TOOLCHAIN_BIN, toolchainMount } from "../toolchain/toolchain.ts"

/** When the driver created the sandbox, Unix milliseconds (the engine only keeps seconds). */
export const CREATED_AT_LABEL = "t1.created-at"
/** The shell's working directory, so that any driver instance can start the sandbox's shell. */
export const WORKDIR_LABEL = "t1.workdir"
/** The verifier toolchain volume a sandbox has mounted (absent: none). */
export const TOOLCHAIN_LABEL = "t1.verifier-toolchain"

/**
 * The main process of a sandbox with the toolchain: the toolchain's sleep, which the agent cannot
 * replace (it could replace the image's), so that after a seal's restart nothing of the agent's
 * runs as the container's main process.
 */
export const MAIN_PROCESS: ReadonlyArray<string> = [`${TOOLCHAIN_BIN}/sleep`, "infinity"]

/**
 * Capabilities a root shell in a task needs, and nothing more (Docker's default set also grants
 * MKNOD, NET_RAW, NET_BIND_SERVICE, SYS_CHROOT, SETPCAP, SETFCAP, FSETID, AUDIT_WRITE):
 * - CHOWN, FOWNER, DAC_OVERRIDE: root can chown, chmod and write any file, as tasks assume
 *   (useradd, fixing permissions, editing files owned by a service user);
 * - SETUID, SETGID: su/runuser and services that drop to their own user;
 * - KILL: root can signal processes of other users (a service the task runs as its own user).
 * A shell of another user gets none of them: exec drops capabilities for non-root users, and
 * no-new-privileges stops setuid binaries from handing them back.
 */
export const CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"] as const

/**
 * The bridge network of sandboxes whose spec allows network: traffic between its containers is
 * disabled (enable_icc false), so one episode cannot reach another's sandbox, as on Docker's
 * default bridge it could. Made by the driver on first use (see SANDBOX_NETWORK_OPTIONS).
 */
export const SANDBOX_NETWORK = "t1-sandboxes"
export const SANDBOX_NETWORK_OPTIONS: Readonly<Record<string, string>> = {
  "com.docker.network.bridge.enable_icc": "false",
}

const RESERVED_LABELS: ReadonlySet<string> = new Set([
  LABELS.managed,
  LABELS.owner,
  LABELS.expiresAt,
  CREATED_AT_LABEL,
  WORKDIR_LABEL,
])

const invalid = (field: string, reason: string) => new InvalidSandboxSpec({ field, reason })

const checkNumber = (
  field: string,
  value: number,
  rules: { readonly integer?: boolean; readonly minPositive?: number },
): InvalidSandboxSpec | undefined => {
  if (typeof value !== "number" || !Number.isFinite(value))
    return invalid(field, `must be a finite number, got ${String(value)}`)
  if (value < 0) return invalid(field, `must be >= 0, got ${value}`)
  if (rules.integer === true && !Number.isInteger(value))
    return invalid(field, `must be an integer, got ${value}`)
  if (rules.minPositive !== undefined && value > 0 && value < rules.minPositive)
    return invalid(field, `must be 0 (engine default) or >= ${rules.minPositive}, got ${value}`)
  return undefined
}

const USER = /^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$/
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const IMAGE = /^[^\s]+$/

/** The first thing wrong with a spec, naming the field; undefined when the spec is usable. */
export const specProblem = (spec: SandboxSpec): InvalidSandboxSpec | undefined => {
  if (typeof spec.image !== "string" || spec.image === "")
    return invalid("image", "must name an image")
  if (!IMAGE.test(spec.image)) return invalid("image", `must not contain whitespace: ${spec.image}`)
  const numeric =
    checkNumber("cpus", spec.cpus, { minPositive: 0.01 }) ??
    checkNumber("memoryMb", spec.memoryMb, { minPositive: 6 }) ??
    checkNumber("pidsLimit", spec.pidsLimit, { integer: true }) ??
    checkNumber("ttlMs", spec.ttlMs, {})
  if (numeric !== undefined) return numeric
  if (spec.ttlMs === 0) return invalid("ttlMs", "must be > 0")
  if (typeof spec.network !== "boolean") return invalid("network", "must be true or false")
  if (typeof spec.user !== "string" || (spec.user !== "" && !USER.test(spec.user)))
    return invalid("user", `must be "", a name or uid, optionally :group, got ${spec.user}`)
  if (typeof spec.workdir !== "string") return invalid("workdir", "must be a path")
  if (spec.workdir !== "" && !spec.workdir.startsWith("/"))
    return invalid("workdir", `must be an absolute path, got ${JSON.stringify(spec.workdir)}`)
  if (/[\0\n\r]/.test(spec.workdir))
    return invalid("workdir", "must not contain NUL or line breaks")
  for (const [name, value] of Object.entries(spec.env)) {
    if (!ENV_NAME.test(name)) return invalid("env", `bad variable name ${JSON.stringify(name)}`)
    if (typeof value !== "string" || value.includes("\0"))
      return invalid("env", `${name} must be a string without NUL`)
  }
  for (const [key, value] of Object.entries(spec.labels)) {
    if (key === "") return invalid("labels", "a label key is empty")
    if (RESERVED_LABELS.has(key)) return invalid("labels", `${key} is set by the driver`)
    if (typeof value !== "string") return invalid("labels", `${key} must be a string`)
  }
  return undefined
}

export interface Bookkeeping {
  /** The driver instance that creates the sandbox. */
  readonly owner: string
  readonly createdAtMs: number
  /** The network a sandbox with network allowed joins (a name or id); default SANDBOX_NETWORK. */
  readonly network?: string | undefined
  /** The verifier toolchain's volume, mounted read-only at TOOLCHAIN_ROOT (see toolchain/). */
  readonly toolchain?: string | undefined
}

/** Every label the container carries: the spec's own, then the driver's (which win). */
export const sandboxLabels = (
  spec: SandboxSpec,
  { owner, createdAtMs, toolchain }: Bookkeeping,
): Record<string, string> => ({
  ...spec.labels,
  [LABELS.managed]: "true",
  [LABELS.owner]: owner,
  [LABELS.expiresAt]: String(createdAtMs + spec.ttlMs),
  [CREATED_AT_LABEL]: String(createdAtMs),
  [WORKDIR_LABEL]: spec.workdir,
  ...(toolchain === undefined ? {} : { [TOOLCHAIN_LABEL]: toolchain }),
})

/**
 * How the container is created. It only idles (docker-init reaps orphans as PID 1, `sleep
 * infinity` keeps it up, the toolchain's own when it is mounted); the agent's shell is a docker exec started later. No binds of host
 * paths, so nothing of the host (least of all its docker.sock) is reachable from inside; the one
 * mount is the verifier toolchain's volume, read-only.
 */
export const containerOptions = (
  spec: SandboxSpec,
  bookkeeping: Bookkeeping,
): Dockerode.ContainerCreateOptions => {
  const memoryBytes = Math.round(spec.memoryMb * 1024 * 1024)
  return {
    Image: spec.image,
    // Overrides any ENTRYPOINT/CMD of a task image: the container must only idle.
    Entrypoint: bookkeeping.toolchain === undefined ? ["sleep", "infinity"] : [...MAIN_PROCESS],
    Cmd: [],
    ...(spec.user === "" ? {} : { User: spec.user }),
    Env: Object.entries(spec.env).map(([name, value]) => `${name}=${value}`),
    Labels: sandboxLabels(spec, bookkeeping),
    Tty: false,
    OpenStdin: false,
    // An image's HEALTHCHECK runs a program of the container's file system every few seconds,
    // as root, whatever the agent made of it: during verification too. Sandboxes have none.
    Healthcheck: { Test: ["NONE"] },
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    HostConfig: {
      Init: true,
      NetworkMode: spec.network ? (bookkeeping.network ?? SANDBOX_NETWORK) : "none",
      ...(spec.cpus > 0 ? { NanoCpus: Math.round(spec.cpus * 1e9) } : {}),
      ...(spec.memoryMb > 0 ? { Memory: memoryBytes, MemorySwap: memoryBytes } : {}),
      PidsLimit: spec.pidsLimit > 0 ? spec.pidsLimit : DEFAULT_PIDS_LIMIT,
      Privileged: false,
      CapDrop: ["ALL"],
      CapAdd: [...CAPABILITIES],
      SecurityOpt: ["no-new-privileges:true"],
      ReadonlyRootfs: false,
      Binds: [],
      Mounts: bookkeeping.toolchain === undefined ? [] : [toolchainMount(bookkeeping.toolchain)],
      VolumesFrom: [],
      Devices: [],
      PublishAllPorts: false,
      AutoRemove: false,
      RestartPolicy: { Name: "no" },
      IpcMode: "private",
      LogConfig: { Type: "none", Config: {} },
    },
  }
}
