import { Context, Layer } from "effect"
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client"
import { MetricConflict } from "./errors.ts"
import type { MetricKind } from "./names.ts"
import { validateMetricName } from "./names.ts"

export interface MetricSpec<L extends string = string> {
  readonly name: string
  readonly help: string
  readonly labelNames?: ReadonlyArray<L>
}

export interface HistogramSpec<L extends string = string> extends MetricSpec<L> {
  readonly buckets?: ReadonlyArray<number>
}

/**
 * Get-or-create metrics on one registry. Asking twice for the same name returns the same metric,
 * so modules can declare what they record without a central list; asking with a different type,
 * labels or buckets throws {@link MetricConflict}, and a badly named metric throws
 * `InvalidMetricName`, both at creation time.
 */
export interface MetricsShape {
  readonly registry: Registry
  readonly counter: <L extends string = string>(spec: MetricSpec<L>) => Counter<L>
  readonly gauge: <L extends string = string>(spec: MetricSpec<L>) => Gauge<L>
  readonly histogram: <L extends string = string>(spec: HistogramSpec<L>) => Histogram<L>
}

export class Metrics extends Context.Service<Metrics, MetricsShape>()("t1/Metrics") {}

export interface MakeMetricsOptions {
  /** prom-client's process metrics (CPU, memory, event-loop lag…) prefixed `t1_`; default true. */
  readonly defaultMetrics?: boolean
}

/**
 * prom-client's default collectors name three gauges `…_total`, which Prometheus reserves for
 * counters (`promtool check metrics` refuses them). The same counts are served by type as
 * `t1_nodejs_active_handles`, `…_requests` and `…_resources`, so the `_total` ones are dropped.
 */
const dropTotalGauges = (registry: Registry): void => {
  for (const what of ["handles", "requests", "resources"])
    registry.removeSingleMetric(`t1_nodejs_active_${what}_total`)
}

type AnyMetric = Counter<string> | Gauge<string> | Histogram<string>

interface Registration {
  readonly kind: MetricKind
  readonly signature: string
  readonly metric: AnyMetric
}

const describe = (
  kind: MetricKind,
  labelNames: ReadonlyArray<string>,
  buckets?: ReadonlyArray<number>,
) =>
  `${kind} {${[...labelNames].sort().join(",")}}${buckets ? ` buckets [${buckets.join(",")}]` : ""}`

export const makeMetrics = (options: MakeMetricsOptions = {}): MetricsShape => {
  const registry = new Registry()
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry, prefix: "t1_" })
    dropTotalGauges(registry)
  }
  const registrations = new Map<string, Registration>()

  const getOrCreate = <M extends AnyMetric>(
    kind: MetricKind,
    spec: HistogramSpec<string>,
    create: () => M,
  ): M => {
    validateMetricName(spec.name, kind)
    const signature = describe(kind, spec.labelNames ?? [], spec.buckets)
    const existing = registrations.get(spec.name)
    if (existing !== undefined) {
      if (existing.signature !== signature) {
        throw new MetricConflict({
          name: spec.name,
          existing: existing.signature,
          requested: signature,
        })
      }
      // Same name and signature means the same kind, hence the same class as `create` returns.
      return existing.metric as M
    }
    if (registry.getSingleMetric(spec.name) !== undefined) {
      throw new MetricConflict({
        name: spec.name,
        existing: "a metric registered outside Metrics (e.g. a default process metric)",
        requested: signature,
      })
    }
    const metric = create()
    registrations.set(spec.name, { kind, signature, metric })
    return metric
  }

  const config = <L extends string>(spec: MetricSpec<L>) => ({
    name: spec.name,
    help: spec.help,
    labelNames: [...(spec.labelNames ?? [])],
    registers: [registry],
  })

  return {
    registry,
    counter: <L extends string>(spec: MetricSpec<L>) =>
      getOrCreate("counter", spec, () => new Counter<L>(config(spec))),
    gauge: <L extends string>(spec: MetricSpec<L>) =>
      getOrCreate("gauge", spec, () => new Gauge<L>(config(spec))),
    histogram: <L extends string>(spec: HistogramSpec<L>) =>
      getOrCreate(
        "histogram",
        spec,
        () =>
          new Histogram<L>(
            spec.buckets ? { ...config(spec), buckets: [...spec.buckets] } : config(spec),
          ),
      ),
  }
}

/** One registry for the process, with the default process metrics. */
export const MetricsLive: Layer.Layer<Metrics> = Layer.sync(Metrics, () => makeMetrics())
