import { access, constants } from "node:fs/promises"
import { type CgroupSupport, probeCgroups } from "../local/cgroup.ts"
import { DEFAULT_PATH, runQuiet } from "../local/isolation.ts"

/** What the bwrap driver runs on this host, found by trying it once. */
export interface BwrapSupport {
  readonly bwrap: string
  readonly unshare: string
  readonly nsenter: string
  readonly setpriv: string
  readonly sh: string
  readonly python: string
  readonly cgroups: CgroupSupport
}

/** Why bwrap sandboxes cannot run here, and what would fix it. */
export class BwrapUnsupported extends Error {
  constructor(
    readonly reason: string,
    readonly fix: string,
  ) {
    super(`${reason}; fix: ${fix}`)
  }
}

const executable = async (path: string) =>
  access(path, constants.X_OK).then(
    () => true,
    () => false,
  )

const find = async (name: string) => {
  for (const dir of DEFAULT_PATH.split(":")) {
    const path = `${dir}/${name}`
    if (await executable(path)) return path
  }
  return undefined
}

const USERNS_FIX =
  "enable unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 (Debian, Ubuntu) and sysctl -w user.max_user_namespaces=15000 (0 disables them); on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0"

/**
 * Checks that bwrap can make a sandbox here, as the sandboxes' host uid: the binary, user
 * namespaces, and root (overlay mounts, cgroups) for the driver itself.
 */
export const probeBwrap = async (options: {
  readonly bwrap: string
  readonly hostUid: number
}): Promise<BwrapSupport> => {
  if (!(await executable(options.bwrap)))
    throw new BwrapUnsupported(
      `bwrap is not installed (no executable ${options.bwrap})`,
      "install the package bubblewrap (apt-get install bubblewrap, dnf install bubblewrap)",
    )
  if (process.getuid?.() !== 0)
    throw new BwrapUnsupported(
      `the bwrap driver mounts each sandbox's overlay and creates its cgroups, which needs root (this process is uid ${process.getuid?.()})`,
      "run the sandbox host as root, or use --driver docker",
    )
  const [unshare, nsenter, setpriv, sh, python] = await Promise.all(
    ["unshare", "nsenter", "setpriv", "sh", "python3"].map(find),
  )
  if (unshare === undefined || nsenter === undefined || setpriv === undefined || sh === undefined)
    throw new BwrapUnsupported(
      "unshare, nsenter, setpriv and sh are needed beside bwrap",
      "install util-linux",
    )
  if (python === undefined)
    throw new BwrapUnsupported(
      "python3 is needed on the host (the process helper and the seal's restore)",
      "install python3",
    )
  const tried = await runQuiet(setpriv, [
    `--reuid=${options.hostUid}`,
    `--regid=${options.hostUid}`,
    "--clear-groups",
    "--",
    options.bwrap,
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    "/",
    "/",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--",
    "/bin/true",
  ])
  if (tried.code !== 0)
    throw new BwrapUnsupported(
      `bwrap cannot create user namespaces here (as uid ${options.hostUid}: ${tried.stderr.trim() || `exit ${tried.code}`})`,
      USERNS_FIX,
    )
  const cgroups = await probeCgroups()
  if (cgroups === undefined)
    throw new BwrapUnsupported(
      "no pids cgroup controller can be delegated here (the sandboxes' limits need it)",
      "mount the cgroup filesystem with the pids controller (cgroup v2 with pids enabled, or v1 pids)",
    )
  return { bwrap: options.bwrap, unshare, nsenter, setpriv, sh, python, cgroups }
}
