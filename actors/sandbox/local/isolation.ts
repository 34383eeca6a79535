import { execFile } from "node:child_process"
import { access, constants } from "node:fs/promises"
import { join } from "node:path"
import { type CgroupSupport, probeCgroups } from "./cgroup.ts"

/**
 * What the local driver can enforce on this host, found once per driver by trying it.
 * The local driver is a convenience for development and small runs, not a security boundary:
 * even with everything here available, sandboxes share the host's filesystem (outside the
 * workdir), users, processes (no pid namespace), kernel and devices.
 */
export interface LocalIsolation {
  /**
   * Each sandbox gets a private mount namespace: its workdir (e.g. /app) is the sandbox
   * directory bind-mounted there, and /run (with docker.sock) is an empty tmpfs.
   */
  readonly mountNamespace: boolean
  /** network: false gives the sandbox its own network namespace with only loopback. */
  readonly networkNamespace: boolean
  /** Per-sandbox cgroups enforce pidsLimit (and memory and cpus when those controllers exist). */
  readonly cgroups: CgroupSupport | undefined
  /** Absolute paths of the helper programs found. */
  readonly tools: Tools
}

export interface Tools {
  readonly bash: string
  readonly sh: string
  readonly setsid: string
  readonly unshare?: string
  readonly nsenter?: string
  readonly setpriv?: string
  readonly prlimit?: string
  readonly ip?: string
  readonly mount?: string
}

/** PATH for helper lookup and for the sandbox's shell. */
export const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

const findTool = async (name: string): Promise<string | undefined> => {
  const dirs = [...(process.env.PATH ?? "").split(":"), ...DEFAULT_PATH.split(":")].filter(Boolean)
  for (const dir of dirs) {
    const candidate = join(dir, name)
    try {
      await access(candidate, constants.X_OK)
      return candidate
    } catch {}
  }
  return undefined
}

/** Runs a short helper; resolves with its exit code (or -1 if it could not run). */
export const runQuiet = (file: string, args: ReadonlyArray<string>, timeoutMs = 5000) =>
  new Promise<{ readonly code: number; readonly stderr: string }>((resolve) => {
    execFile(
      file,
      [...args],
      { timeout: timeoutMs, env: { PATH: DEFAULT_PATH } },
      (error, _out, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
        resolve({ code, stderr: String(stderr) })
      },
    )
  })

export const findTools = async (): Promise<Tools> => {
  const [bash, sh, setsid, unshare, nsenter, setpriv, prlimit, ip, mount] = await Promise.all(
    ["bash", "sh", "setsid", "unshare", "nsenter", "setpriv", "prlimit", "ip", "mount"].map(
      findTool,
    ),
  )
  if (bash === undefined || sh === undefined || setsid === undefined)
    throw new Error("the local driver needs bash, sh and setsid on PATH")
  return { bash, sh, setsid, unshare, nsenter, setpriv, prlimit, ip, mount }
}

/**
 * Tries each mechanism for real. `mode: "none"` skips them all (the unprivileged behaviour,
 * e.g. to test it as root). `scratchDir` is an existing directory a probe may mount over inside
 * a throwaway namespace.
 */
export const probeIsolation = async (
  mode: "auto" | "none",
  scratchDir: string,
): Promise<LocalIsolation> => {
  const tools = await findTools()
  if (mode === "none" || tools.unshare === undefined || tools.nsenter === undefined)
    return {
      mountNamespace: false,
      networkNamespace: false,
      cgroups: mode === "none" ? undefined : await probeCgroups(),
      tools,
    }
  const { unshare } = tools
  const [mountNs, netNs, cgroups] = await Promise.all([
    runQuiet(unshare, [
      "--mount",
      "--propagation",
      "private",
      "--",
      tools.sh,
      "-c",
      'mount -t tmpfs t1-probe "$1"',
      "t1-probe",
      scratchDir,
    ]),
    runQuiet(unshare, ["--net", "--", tools.sh, "-c", "exit 0"]),
    probeCgroups(),
  ])
  return {
    mountNamespace: mountNs.code === 0 && tools.mount !== undefined,
    networkNamespace: netNs.code === 0,
    cgroups,
    tools,
  }
}
