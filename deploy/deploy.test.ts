/**
 * The deployment directory: every manifest parses and has the shape the README promises, flags
 * and variables are ones the CLI knows, every metric an alert or panel uses is registered by the
 * code, and promtool accepts the Prometheus config, the rules and their unit tests.
 */
import { execFile, spawnSync } from "node:child_process"
import {
  accessSync,
  constants,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { collectDefaultMetrics, Registry } from "prom-client"
import { describe, expect, it, type TestContext } from "vitest"
import { parse, parseAllDocuments } from "yaml"

const DEPLOY = dirname(fileURLToPath(import.meta.url))
const ROOT = resolve(DEPLOY, "..")
const read = (path: string) => readFileSync(join(ROOT, path), "utf8")

type Json = string | number | boolean | null | Json[] | { [key: string]: Json }
type Obj = { [key: string]: Json }

const isObj = (v: Json | undefined): v is Obj =>
  typeof v === "object" && v !== null && !Array.isArray(v)
const obj = (v: Json | undefined, what: string): Obj => {
  if (!isObj(v)) throw new Error(`${what}: expected a mapping, got ${JSON.stringify(v)}`)
  return v
}
const arr = (v: Json | undefined, what: string): Json[] => {
  if (!Array.isArray(v)) throw new Error(`${what}: expected a list, got ${JSON.stringify(v)}`)
  return v
}
const str = (v: Json | undefined, what: string): string => {
  if (typeof v !== "string") throw new Error(`${what}: expected a string, got ${JSON.stringify(v)}`)
  return v
}
const strings = (v: Json | undefined, what: string): string[] =>
  arr(v, what).map((x, i) => str(x, `${what}[${i}]`))

/** Every string anywhere inside a value. */
const allStrings = (v: Json | undefined): string[] =>
  typeof v === "string"
    ? [v]
    : Array.isArray(v)
      ? v.flatMap(allStrings)
      : isObj(v)
        ? Object.values(v).flatMap(allStrings)
        : []

const yamlFile = (path: string): Obj => obj(parse(read(path), { merge: true }) as Json, path)
const yamlDocs = (path: string): Obj[] =>
  parseAllDocuments(read(path)).map((doc, i) => {
    if (doc.errors.length > 0) throw new Error(`${path} document ${i}: ${doc.errors[0]?.message}`)
    return obj(doc.toJS() as Json, `${path} document ${i}`)
  })

// The t1 processes every deployment runs: the gateway and one pool per actor.
const ACTORS = ["coordinator", "sampler", "sandbox", "verifier", "buffer", "learner"] as const
const POOLS = ["gateway", ...ACTORS] as const
type Pool = (typeof POOLS)[number]
const METRICS_PORT = (pool: Pool) => (pool === "gateway" ? 9465 : 9464)
const AUTOSCALED = ["sampler", "verifier"]
// The three nodes of the NATS JetStream cluster the Compose file runs.
const NATS_NODES = ["nats-1", "nats-2", "nats-3"] as const

// ---- what the CLI accepts ------------------------------------------------------------------

const FLAG = /--[a-z][a-z0-9-]*/g
const ENV = /\bT1_[A-Z0-9_]+\b/g

interface Accepted {
  readonly flags: ReadonlySet<string>
  readonly env: ReadonlySet<string>
}

/** A CLI source file and the files under cli/ it imports (shared flag and logging help). */
const withCliImports = (path: string): string[] => {
  const text = read(path)
  const imported = [...text.matchAll(/from "(\.{1,2}\/[^"]+\.ts)"/g)]
    .map((m) => relative(ROOT, resolve(ROOT, dirname(path), m[1] ?? "")))
    .filter((p) => p.startsWith("cli/"))
  return [path, ...imported]
}

/**
 * Flags and variables named in the sources of a command's help and parsing: the command's file
 * with the shared CLI files it imports, and for an actor the module that defines it (found
 * through the registry in actors/index.ts). Actors that share a module (buffer and learner)
 * accept each other's names here; a name no source mentions is still caught.
 */
const accepted = (() => {
  const registry = read("actors/index.ts")
  const modules = new Map<string, string>()
  for (const m of registry.matchAll(/import \{([^}]*)\} from "(\.\/[^"]+)"/g)) {
    for (const id of (m[1] ?? "").split(",")) {
      modules.set(id.trim(), relative(ROOT, resolve(ROOT, "actors", m[2] ?? "")))
    }
  }
  const scan = (files: ReadonlyArray<string>): Accepted => {
    const text = files.map(read).join("\n")
    return { flags: new Set(text.match(FLAG) ?? []), env: new Set(text.match(ENV) ?? []) }
  }
  const result = new Map<Pool, Accepted>()
  result.set("gateway", scan(withCliImports("cli/commands/gateway.ts")))
  const common = withCliImports("cli/commands/actor.ts")
  for (const actor of ACTORS) {
    const id = registry.match(new RegExp(`^\\s+${actor}: (\\w+),$`, "m"))?.[1]
    const module = id === undefined ? undefined : modules.get(id)
    if (module === undefined) throw new Error(`actors/index.ts: no registry entry for ${actor}`)
    result.set(actor, scan([...common, module]))
  }
  return result
})()

const expectAccepted = (pool: Pool, args: ReadonlyArray<string>, env: ReadonlyArray<string>) => {
  const ok = accepted.get(pool)
  if (ok === undefined) throw new Error(`no CLI sources for ${pool}`)
  for (const flag of args.filter((a) => a.startsWith("--"))) {
    expect(ok.flags.has(flag), `${pool}: ${flag} is not an option of its command`).toBe(true)
  }
  for (const name of env.filter((e) => e.startsWith("T1_"))) {
    expect(ok.env.has(name), `${pool}: ${name} is not a variable its command reads`).toBe(true)
  }
}

// ---- what the code registers ---------------------------------------------------------------

type Kind = "counter" | "gauge" | "histogram" | "summary"
interface Registered {
  readonly kind: Kind
  /** undefined: not known (prom-client's default metrics). */
  readonly labels: ReadonlySet<string> | undefined
}

const sourceFiles = (dir: string): string[] =>
  readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .filter((e) => !/\.(test|contract)\.ts$/.test(e.name))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
    .filter((p) => !p.includes("node_modules") && !p.startsWith("proto/gen"))

const labelsOf = (text: string, at: number): Set<string> => {
  const end = text.indexOf("})", at)
  const spec = text.slice(at, end === -1 ? undefined : end)
  const list = spec.match(/labelNames:\s*\[([^\]]*)\]/)?.[1] ?? ""
  return new Set([...list.matchAll(/"([a-z_][a-z0-9_]*)"/g)].map((m) => m[1] ?? ""))
}

/** t1_* metrics declared through Metrics (`m.counter({ name: "t1_…", labelNames })`). */
const scanRegistrations = (): Map<string, Registered> => {
  const found = new Map<string, Registered>()
  for (const file of ["services", "actors", "model", "tasks", "cli"].flatMap(sourceFiles)) {
    const text = read(file)
    const direct = /\.(counter|gauge|histogram)(?:<[^>]*>)?\(\s*\{\s*name:\s*"(t1_[a-z0-9_]+)"/g
    for (const m of text.matchAll(direct)) {
      found.set(m[2] ?? "", { kind: m[1] as Kind, labels: labelsOf(text, m.index) })
    }
    // A helper that prefixes names, e.g. const g = (name: string, …) => m.gauge({ name: `t1_learner_${name}`, … })
    const helper =
      /const (\w+) = \(name: string[^)]*\) =>\s*\w+\.(counter|gauge|histogram)\(\{\s*name:\s*`(t1_[a-z0-9_]*)\$\{name\}`/g
    for (const h of text.matchAll(helper)) {
      for (const call of text.matchAll(new RegExp(`\\b${h[1]}\\(\\s*"([a-z0-9_]+)"`, "g"))) {
        found.set(`${h[3]}${call[1]}`, { kind: h[2] as Kind, labels: labelsOf(text, h.index) })
      }
    }
  }
  return found
}

const registered = async (): Promise<Map<string, Registered>> => {
  const found = scanRegistrations()
  // prom-client's default process metrics, under the prefix services/metrics gives them.
  const source = read("services/metrics/metrics.ts")
  const prefix = source.match(/collectDefaultMetrics\(\{[^}]*prefix:\s*"([^"]+)"/)?.[1]
  if (prefix === undefined) throw new Error("services/metrics/metrics.ts: no collectDefaultMetrics")
  const registry = new Registry()
  collectDefaultMetrics({ register: registry, prefix })
  for (const m of await registry.getMetricsAsJSON()) {
    found.set(m.name, { kind: String(m.type) as Kind, labels: undefined })
  }
  return found
}

const HISTOGRAM_SERIES = /_(bucket|sum|count)$/
/** The registered metric a series name belongs to (histogram series resolve to their metric). */
const metricOf = (metrics: Map<string, Registered>, series: string) => {
  const direct = metrics.get(series)
  if (direct !== undefined) return { name: series, metric: direct }
  const base = series.replace(HISTOGRAM_SERIES, "")
  const metric = metrics.get(base)
  if (base !== series && (metric?.kind === "histogram" || metric?.kind === "summary"))
    return { name: base, metric }
  return undefined
}

const seriesNames = (text: string) => [...new Set(text.match(/\bt1_[a-z0-9_]+/g) ?? [])]

/**
 * The label names a PromQL expression (and its legend) relies on, each of which some metric in
 * it must carry. Prometheus' own target labels (job, instance) and le are always there, and a
 * metric label named `job` is renamed `exported_job` by the scrape.
 */
const checkLabels = (
  metrics: Map<string, Registered>,
  expr: string,
  legend: string,
  what: string,
) => {
  const used = new Set<string>()
  for (const m of expr.matchAll(/\bt1_[a-z0-9_]+\{([^}]*)\}/g)) {
    for (const l of (m[1] ?? "").matchAll(/([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)/g)) used.add(l[1] ?? "")
  }
  for (const m of expr.matchAll(/\b(?:by|without|on|ignoring)\s*\(([^)]*)\)/g)) {
    for (const l of (m[1] ?? "").split(",")) if (l.trim() !== "") used.add(l.trim())
  }
  for (const m of legend.matchAll(/\{\{\s*(\w+)\s*\}\}/g)) used.add(m[1] ?? "")
  const allowed = new Set(["job", "instance", "le"])
  for (const series of seriesNames(expr)) {
    const labels = metricOf(metrics, series)?.metric.labels
    if (labels === undefined) return // a default process metric: its labels are prom-client's
    for (const l of labels) allowed.add(l === "job" ? "exported_job" : l)
  }
  for (const label of used) {
    expect(allowed.has(label), `${what}: label ${label} is on none of its metrics`).toBe(true)
  }
}

// ---- promtool ------------------------------------------------------------------------------

const onPath = (name: string): string | undefined => {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue
    try {
      accessSync(join(dir, name), constants.X_OK)
      return join(dir, name)
    } catch {
      // not here
    }
  }
  return undefined
}

const PROMTOOL = onPath("promtool")

/** Runs promtool, or skips where it is missing; in CI a missing promtool fails. */
const promtool = async (ctx: TestContext, args: ReadonlyArray<string>) => {
  if (PROMTOOL === undefined) {
    ctx
      .expect(process.env.CI, "promtool is not on PATH; CI installs it (Debian package prometheus)")
      .toBeFalsy()
    ctx.skip()
    return
  }
  const run = await new Promise<{ code: number; output: string }>((done) => {
    execFile(PROMTOOL, [...args], { cwd: join(DEPLOY, "prometheus") }, (error, stdout, stderr) =>
      done({ code: error === null ? 0 : Number(error.code ?? 1), output: `${stdout}${stderr}` }),
    )
  })
  ctx.expect(run.code, `promtool ${args.join(" ")}\n${run.output}`).toBe(0)
}

// ---- tests ---------------------------------------------------------------------------------

describe("docker image", () => {
  it("runs the CLI as a non-root user from a production install of the repository root", () => {
    const dockerfile = read("deploy/Dockerfile")
    expect(dockerfile).toMatch(/^FROM \$\{NODE_IMAGE\}/m)
    expect(dockerfile).toContain("ARG NODE_IMAGE=node:20-bookworm-slim")
    expect(dockerfile).toMatch(/npm ci --omit=dev/)
    expect(dockerfile).toMatch(/^USER node$/m)
    expect(dockerfile).toContain('ENTRYPOINT ["node", "cli/bin/t1.js"]')
    for (const m of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
      for (const src of (m[1] ?? "").split(" ")) {
        expect(existsSync(join(ROOT, src)), `COPY ${src}: missing in the build context`).toBe(true)
      }
    }
    // Everything the image copies is let through the build context's ignore file.
    const ignore = read("deploy/Dockerfile.dockerignore")
    for (const path of [
      "package.json",
      "package-lock.json",
      "proto",
      "services",
      "actors",
      "model",
      "tasks",
      "cli",
    ]) {
      expect(ignore).toContain(`!${path}\n`)
    }
    // tsx runs the sources at run time, so it must be a production dependency.
    const pkg = obj(JSON.parse(read("package.json")) as Json, "package.json")
    expect(Object.keys(obj(pkg.dependencies, "dependencies"))).toContain("tsx")
  })
})

describe("compose", () => {
  const compose = yamlFile("deploy/compose.yaml")
  const services = obj(compose.services, "services")
  const t1 = (name: Pool) => obj(services[name], `services.${name}`)

  it("has three NATS nodes, the gateway, every actor pool, Prometheus and Grafana", () => {
    expect(Object.keys(services).sort()).toEqual(
      [...POOLS, ...NATS_NODES, "prometheus", "grafana"].sort(),
    )
  })

  it.each(NATS_NODES)("%s: JetStream on a volume of its own, routes to every node", (node) => {
    const nats = obj(services[node], node)
    const command = strings(nats.command, `${node}.command`)
    const flag = (name: string) => command[command.indexOf(name) + 1]
    expect(command).toContain("--jetstream")
    expect(flag("--name")).toBe(node)
    expect(flag("--cluster_name")).toBe("t1")
    expect(flag("--cluster")).toBe("nats://0.0.0.0:6222")
    expect(flag("--routes")?.split(",")).toEqual(NATS_NODES.map((n) => `nats://${n}:6222`))
    const store = flag("--store_dir")
    expect(store).toBeDefined()
    const volumes = strings(nats.volumes, `${node}.volumes`)
    expect(volumes).toEqual([`${node}-data:${store}`])
    expect(Object.keys(obj(compose.volumes, "volumes"))).toContain(`${node}-data`)
    expect(allStrings(nats.healthcheck).join(" ")).toContain("/healthz")
  })

  it.each(POOLS)("%s: the t1 image, its command, NATS, metrics on 0.0.0.0, /healthz", (pool) => {
    const s = t1(pool)
    expect(s.image).toBe(`\${T1_IMAGE:-t1:dev}`)
    const build = obj(s.build, `${pool}.build`)
    expect(
      existsSync(join(DEPLOY, str(build.context, "context"), str(build.dockerfile, "dockerfile"))),
    ).toBe(true)
    const command = strings(s.command, `${pool}.command`)
    expect(command.slice(0, pool === "gateway" ? 1 : 2)).toEqual(
      pool === "gateway" ? ["gateway"] : ["actor", pool],
    )
    const env = obj(s.environment, `${pool}.environment`)
    expect(env.T1_NATS_URL).toBe(NATS_NODES.map((n) => `nats://${n}:4222`).join(","))
    expect(env.T1_NATS_REPLICAS).toBe("3")
    expect(env.T1_METRICS_HOST).toBe("0.0.0.0")
    expectAccepted(pool, command, Object.keys(env))
    const health = obj(s.healthcheck, `${pool}.healthcheck`)
    const test = strings(health.test, `${pool}.healthcheck.test`)
    expect(test[0]).toBe("CMD")
    expect(test.join(" ")).toContain(`http://127.0.0.1:${METRICS_PORT(pool)}/healthz`)
    for (const node of NATS_NODES)
      expect(obj(obj(s.depends_on, "depends_on")[node], `depends_on.${node}`).condition).toBe(
        "service_healthy",
      )
    if (pool === "gateway") {
      expect(env.T1_GATEWAY_LISTEN).toBe("0.0.0.0:50051")
      expect(strings(s.ports, "gateway.ports").some((p) => p.endsWith(":50051"))).toBe(true)
    }
  })

  it("scales samplers and verifiers by deploy.replicas; one sandbox host per engine", () => {
    for (const pool of AUTOSCALED) {
      expect(String(obj(t1(pool as Pool).deploy, `${pool}.deploy`).replicas)).toMatch(
        /^(\d+|\$\{T1_\w+:-\d+\})$/,
      )
    }
    expect(obj(t1("sandbox").deploy, "sandbox.deploy").replicas).toBe(1)
  })

  it("runs the buffer and learner as pools (no --job), pinned only through T1_JOB", () => {
    for (const pool of ["buffer", "learner"] as const) {
      expect(strings(t1(pool).command, pool)).not.toContain("--job")
      expect(obj(t1(pool).environment, pool).T1_JOB).toBe(`\${T1_JOB:-}`)
    }
  })

  it("mounts the Docker socket into the sandbox host only", () => {
    const mounting = Object.entries(services)
      .filter(([, s]) =>
        allStrings(obj(s, "service").volumes).some((v) => v.includes("docker.sock")),
      )
      .map(([name]) => name)
    expect(mounting).toEqual(["sandbox"])
    expect(strings(t1("sandbox").volumes, "sandbox.volumes")).toContain(
      "/var/run/docker.sock:/var/run/docker.sock",
    )
    expect(obj(t1("sandbox").environment, "sandbox.environment").T1_SANDBOX_DRIVER).toBe("docker")
  })

  it("mounts the Prometheus and Grafana configuration of this directory", () => {
    const mounts = (name: string) =>
      strings(obj(services[name], name).volumes, `${name}.volumes`).filter((v) =>
        v.startsWith("./"),
      )
    for (const mount of [...mounts("prometheus"), ...mounts("grafana")]) {
      const source = mount.split(":")[0] ?? ""
      expect(existsSync(join(DEPLOY, source)), `${mount}: ${source} is missing`).toBe(true)
    }
    expect(mounts("prometheus")).toContain("./prometheus:/etc/prometheus:ro")
    const grafana = mounts("grafana")
    expect(grafana).toContain("./grafana/provisioning:/etc/grafana/provisioning:ro")
    const dashboard = grafana.find((m) => m.startsWith("./grafana/dashboard.json:"))
    expect(dashboard).toBeDefined()
    // The dashboards provider reads the directory the dashboard is mounted in.
    const provider = yamlFile("deploy/grafana/provisioning/dashboards/t1.yaml")
    const path = obj(arr(provider.providers, "providers")[0], "provider").options
    expect(dirname(dashboard?.split(":")[1] ?? "")).toBe(obj(path, "options").path)
  })
})

describe("kubernetes", () => {
  const kustomization = yamlFile("deploy/k8s/kustomization.yaml")
  const resources = strings(kustomization.resources, "resources")
  const docs = resources.flatMap((file) => yamlDocs(`deploy/k8s/${file}`))
  const find = (kind: string, name: string) =>
    docs.find((d) => d.kind === kind && obj(d.metadata, "metadata").name === name)
  const deployment = (pool: Pool) => {
    const d = find("Deployment", `t1-${pool}`)
    if (d === undefined) throw new Error(`no Deployment t1-${pool}`)
    return d
  }
  const podSpec = (d: Obj) => obj(obj(obj(d.spec, "spec").template, "template").spec, "pod spec")
  const container = (d: Obj) => obj(arr(podSpec(d).containers, "containers")[0], "container")

  it("lists every manifest of the directory in kustomization.yaml", () => {
    const files = readdirSync(join(DEPLOY, "k8s")).filter(
      (f) => f.endsWith(".yaml") && f !== "kustomization.yaml",
    )
    expect([...resources].sort()).toEqual(files.sort())
    expect(kustomization.namespace).toBe("t1")
    expect(find("Namespace", "t1")).toBeDefined()
  })

  it("runs NATS as a three-node StatefulSet cluster with JetStream on persistent volumes", () => {
    const sts = find("StatefulSet", "nats")
    if (sts === undefined) throw new Error("no StatefulSet nats")
    const claims = arr(obj(sts.spec, "spec").volumeClaimTemplates, "volumeClaimTemplates")
    const claim = obj(obj(claims[0], "claim").metadata, "claim.metadata").name
    const c = container(sts)
    const dataMount = arr(c.volumeMounts, "volumeMounts")
      .map((m) => obj(m, "mount"))
      .find((m) => m.name === claim)
    const config = str(
      obj(find("ConfigMap", "nats-config")?.data, "nats-config")["nats.conf"],
      "nats.conf",
    )
    expect(config).toMatch(new RegExp(`jetstream \\{[^}]*store_dir: ${dataMount?.mountPath}\\n`))
    const spec = obj(sts.spec, "spec")
    expect(spec.replicas).toBe(3)
    expect(spec.podManagementPolicy).toBe("Parallel")
    const routes = /cluster \{[^}]*routes: \[([^\]]*)\]/.exec(config)?.[1]?.trim().split(/\s+/)
    expect(routes).toEqual([0, 1, 2].map((i) => `nats://nats-${i}.${spec.serviceName}:6222`))
    expect(config).toContain("server_name: $POD_NAME")
    const headless = find("Service", str(spec.serviceName, "serviceName"))
    const headlessPorts = arr(obj(headless?.spec, "headless.spec").ports, "ports")
    expect(headlessPorts.map((p) => obj(p, "port").port)).toContain(6222)
    expect(find("PodDisruptionBudget", "nats")).toBeDefined()
    expect(find("Service", "nats")).toBeDefined()
    expect(c.livenessProbe).toBeDefined()
    expect(c.readinessProbe).toBeDefined()
  })

  const common = obj(find("ConfigMap", "t1-common")?.data, "t1-common")
  const jobConfig = obj(find("ConfigMap", "t1-job")?.data, "t1-job")

  it("shares the NATS address and the metrics bind address through the t1-common ConfigMap", () => {
    expect(common.T1_NATS_URL).toBe(
      [0, 1, 2].map((i) => `nats://nats-${i}.nats-headless:4222`).join(","),
    )
    expect(common.T1_NATS_REPLICAS).toBe("3")
    expect(common.T1_METRICS_HOST).toBe("0.0.0.0")
    expect(jobConfig.T1_JOB).toBe("")
  })

  it.each(POOLS)(
    "%s: a Deployment with probes on /healthz, resources and metrics annotations",
    (pool) => {
      const d = deployment(pool)
      const template = obj(obj(d.spec, "spec").template, "template")
      const c = container(d)
      expect(c.image).toBe("t1")
      const args = strings(c.args, "args")
      expect(args.slice(0, pool === "gateway" ? 1 : 2)).toEqual(
        pool === "gateway" ? ["gateway"] : ["actor", pool],
      )
      if (pool === "buffer" || pool === "learner") expect(args).not.toContain("--job")

      const envFrom = arr(c.envFrom, "envFrom").map(
        (e) => obj(obj(e, "envFrom").configMapRef, "ref").name,
      )
      expect(envFrom).toContain("t1-common")
      const env = arr(c.env ?? [], "env").map((e) => str(obj(e, "env").name, "env.name"))
      const names = [
        ...env,
        ...Object.keys(common),
        ...(envFrom.includes("t1-job") ? Object.keys(jobConfig) : []),
      ]
      expectAccepted(pool, args, names)
      expect(envFrom.includes("t1-job")).toBe(["sampler", "buffer", "learner"].includes(pool))

      const port = METRICS_PORT(pool)
      const ports = arr(c.ports, "ports").map((p) => obj(p, "port"))
      expect(ports).toContainEqual({ name: "metrics", containerPort: port })
      const annotations = obj(obj(template.metadata, "metadata").annotations, "annotations")
      expect(annotations).toMatchObject({
        "prometheus.io/scrape": "true",
        "prometheus.io/port": String(port),
        "prometheus.io/path": "/metrics",
      })

      const healthz = { path: "/healthz", port: "metrics" }
      expect(obj(c.livenessProbe, "livenessProbe").httpGet).toEqual(healthz)
      expect(obj(c.startupProbe, "startupProbe").httpGet).toEqual(healthz)
      const readiness = obj(c.readinessProbe, "readinessProbe")
      if (pool === "gateway") {
        expect(readiness.grpc).toEqual({ port: 50051 })
        expect(ports).toContainEqual({ name: "grpc", containerPort: 50051 })
      } else expect(readiness.httpGet).toEqual(healthz)

      const resources = obj(c.resources, "resources")
      for (const side of ["requests", "limits"]) {
        expect(Object.keys(obj(resources[side], side)).sort()).toEqual(["cpu", "memory"])
      }
      expect(obj(podSpec(d).securityContext, "securityContext").runAsNonRoot).toBe(true)
      expect(obj(c.securityContext, "container securityContext")).toMatchObject({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
      })
      expect(arr(c.volumeMounts, "volumeMounts")).toContainEqual({ name: "tmp", mountPath: "/tmp" })
    },
  )

  it("autoscales the sampler and verifier pools with autoscaling/v2", () => {
    const hpas = docs.filter((d) => d.kind === "HorizontalPodAutoscaler")
    expect(hpas.every((h) => h.apiVersion === "autoscaling/v2")).toBe(true)
    const targets = hpas.map((h) => obj(obj(h.spec, "spec").scaleTargetRef, "scaleTargetRef"))
    expect(targets.map((t) => `${t.kind}/${t.name}`).sort()).toEqual(
      AUTOSCALED.map((p) => `Deployment/t1-${p}`).sort(),
    )
    for (const h of hpas) {
      const spec = obj(h.spec, "spec")
      expect(Number(spec.minReplicas)).toBeGreaterThanOrEqual(1)
      expect(Number(spec.maxReplicas)).toBeGreaterThan(Number(spec.minReplicas))
      expect(arr(spec.metrics, "metrics").length).toBeGreaterThan(0)
    }
    // The autoscaler owns their replica count: neither the manifest nor kustomize sets one.
    const replicas = arr(kustomization.replicas, "replicas").map((r) => obj(r, "replica").name)
    for (const pool of AUTOSCALED) {
      expect(obj(deployment(pool as Pool).spec, "spec").replicas).toBeUndefined()
      expect(replicas).not.toContain(`t1-${pool}`)
    }
    for (const name of replicas) expect(find("Deployment", String(name))).toBeDefined()
  })

  it("mounts the Docker socket (hostPath) into the sandbox hosts only", () => {
    const mounting = docs
      .filter((d) => allStrings(d).some((s) => s.includes("docker.sock")))
      .map((d) => `${d.kind}/${obj(d.metadata, "metadata").name}`)
    expect(mounting).toEqual(["Deployment/t1-sandbox"])
    const volumes = arr(podSpec(deployment("sandbox")).volumes, "volumes").map((v) =>
      obj(v, "volume"),
    )
    expect(volumes).toContainEqual({
      name: "docker-sock",
      hostPath: { path: "/var/run/docker.sock", type: "Socket" },
    })
  })

  it("exposes the gateway's gRPC and metrics ports and every pod's metrics port", () => {
    const gateway = obj(find("Service", "t1-gateway")?.spec, "t1-gateway spec")
    const ports = arr(gateway.ports, "ports").map((p) => obj(p, "port"))
    expect(ports).toContainEqual(expect.objectContaining({ port: 50051, targetPort: "grpc" }))
    expect(ports).toContainEqual(expect.objectContaining({ port: 9465, targetPort: "metrics" }))
    const metrics = obj(find("Service", "t1-metrics")?.spec, "t1-metrics spec")
    expect(arr(metrics.ports, "ports")).toContainEqual(
      expect.objectContaining({ name: "metrics", targetPort: "metrics" }),
    )
  })

  const kubectl = onPath("kubectl")
  it.skipIf(kubectl === undefined)("builds with kubectl kustomize", () => {
    const run = spawnSync(kubectl ?? "kubectl", ["kustomize", join(DEPLOY, "k8s")], {
      encoding: "utf8",
    })
    expect(run.status, run.stderr).toBe(0)
    const kinds = parseAllDocuments(run.stdout).map((d) => (d.toJS() as { kind: string }).kind)
    expect(kinds.filter((k) => k === "Deployment")).toHaveLength(POOLS.length)
  })
})

describe("prometheus and grafana", () => {
  const config = yamlFile("deploy/prometheus/prometheus.yml")

  it("scrapes every pool by its compose service name, as the rules' job names expect", () => {
    const jobs = new Map(
      arr(config.scrape_configs, "scrape_configs").map((j) => {
        const job = obj(j, "scrape config")
        return [str(job.job_name, "job_name"), job] as const
      }),
    )
    for (const pool of POOLS) {
      const job = jobs.get(`t1-${pool}`)
      if (job === undefined) throw new Error(`no scrape job t1-${pool}`)
      expect(arr(job.dns_sd_configs, "dns_sd_configs")).toContainEqual(
        expect.objectContaining({ names: [pool], port: METRICS_PORT(pool) }),
      )
    }
    expect(strings(config.rule_files, "rule_files")).toEqual(["alerts.yml"])
  })

  it("has the alerts the deployment promises", () => {
    const groups = arr(yamlFile("deploy/prometheus/alerts.yml").groups, "groups")
    const alerts = groups
      .flatMap((g) => arr(obj(g, "group").rules, "rules"))
      .map((r) => obj(r, "rule"))
    expect(alerts.map((a) => a.alert)).toEqual(
      expect.arrayContaining([
        "T1TargetDown",
        "T1PoolDown",
        "T1BusErrors",
        "T1NoProgress",
        "T1SandboxInfraErrors",
        "T1TrainInferLogprobDiffHigh",
        "T1GatewayErrors",
      ]),
    )
    const tested = new Set(
      arr(yamlFile("deploy/prometheus/alerts.test.yml").tests, "tests").flatMap((t) =>
        arr(obj(t, "test").alert_rule_test, "alert_rule_test").map((a) => obj(a, "case").alertname),
      ),
    )
    for (const a of alerts)
      expect(tested.has(a.alert ?? ""), `${a.alert} has no unit test`).toBe(true)
  })

  it("uses only metric names and labels the code registers", async () => {
    const metrics = await registered()
    // The scan must see the ways metrics are declared, or this test proves nothing.
    expect(metrics.get("t1_sandbox_errors_total")?.labels).toEqual(new Set(["class", "error"]))
    expect(metrics.get("t1_learner_train_infer_logprob_abs_diff")?.kind).toBe("gauge")
    expect(metrics.get("t1_process_resident_memory_bytes")?.kind).toBe("gauge")

    for (const file of [
      "deploy/prometheus/alerts.yml",
      "deploy/prometheus/alerts.test.yml",
      "deploy/grafana/dashboard.json",
      "deploy/README.md",
    ]) {
      for (const series of seriesNames(read(file))) {
        expect(
          metricOf(metrics, series),
          `${file}: ${series} is not a registered metric`,
        ).toBeDefined()
      }
    }
    const rules = arr(yamlFile("deploy/prometheus/alerts.yml").groups, "groups").flatMap((g) =>
      arr(obj(g, "group").rules, "rules").map((r) => obj(r, "rule")),
    )
    for (const rule of rules) checkLabels(metrics, str(rule.expr, "expr"), "", String(rule.alert))
    for (const { expr, legend, title } of dashboardTargets())
      checkLabels(metrics, expr, legend, title)
  })

  it("provisions the datasource the dashboard uses", () => {
    const sources = arr(
      yamlFile("deploy/grafana/provisioning/datasources/prometheus.yaml").datasources,
      "datasources",
    ).map((d) => obj(d, "datasource"))
    expect(sources).toHaveLength(1)
    const uids = new Set(dashboardTargets().map((t) => t.datasource))
    expect([...uids]).toEqual([sources[0]?.uid])
    expect(sources[0]?.url).toBe("http://prometheus:9090")
    const titles = dashboardTargets().map((t) => t.title)
    for (const needed of [
      "Episodes finished",
      "reward",
      "Resolved rate",
      "Loss",
      "Alignment",
      "Sandbox creation latency",
      "Messages / s",
      "gRPC calls",
      "Resident memory",
    ]) {
      expect(
        titles.some((t) => t.includes(needed)),
        `no panel about ${needed}`,
      ).toBe(true)
    }
  })

  // promtool runs as separate processes: all four at once.
  it.concurrent("promtool check config", (ctx) =>
    promtool(ctx, ["check", "config", "prometheus.yml"]))
  it.concurrent("promtool check rules", (ctx) => promtool(ctx, ["check", "rules", "alerts.yml"]))
  it.concurrent("promtool test rules", (ctx) => promtool(ctx, ["test", "rules", "alerts.test.yml"]))
  it.concurrent("promtool parses every dashboard query", async (ctx) => {
    // Each query as a recording rule, with Grafana's interval variables given a value.
    const dir = mkdtempSync(join(tmpdir(), "t1-dashboard-"))
    try {
      const rules = dashboardTargets().map((t, i) => ({
        record: `t1_dashboard:query_${i}`,
        expr: t.expr.replaceAll("$__rate_interval", "5m").replaceAll("$__interval", "1m"),
      }))
      const file = join(dir, "dashboard-rules.json")
      writeFileSync(file, JSON.stringify({ groups: [{ name: "dashboard", rules }] }))
      await promtool(ctx, ["check", "rules", file])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

interface Target {
  readonly title: string
  readonly expr: string
  readonly legend: string
  readonly datasource: Json | undefined
}

function dashboardTargets(): Target[] {
  const dashboard = obj(JSON.parse(read("deploy/grafana/dashboard.json")) as Json, "dashboard")
  const panels = arr(dashboard.panels, "panels").map((p) => obj(p, "panel"))
  const nested = panels.flatMap((p) =>
    Array.isArray(p.panels) ? p.panels.map((q) => obj(q, "panel")) : [],
  )
  return [...panels, ...nested].flatMap((p) =>
    arr(p.targets ?? [], "targets").map((t) => {
      const target = obj(t, "target")
      return {
        title: String(p.title),
        expr: str(target.expr, `${String(p.title)}: expr`),
        legend: typeof target.legendFormat === "string" ? target.legendFormat : "",
        datasource: obj(target.datasource ?? p.datasource, "datasource").uid,
      }
    }),
  )
}
