import { Data } from "effect"

/** A metric name outside the `t1_<component>_<thing>_<unit>` convention dashboards rely on. */
export class InvalidMetricName extends Data.TaggedError("InvalidMetricName")<{
  readonly name: string
  readonly reason: string
}> {
  override get message(): string {
    return `invalid metric name "${this.name}": ${this.reason}`
  }
}

/**
 * The same name asked for with a different type, label set or buckets. Prometheus would keep
 * only one of them, so the second caller's series would silently go missing.
 */
export class MetricConflict extends Data.TaggedError("MetricConflict")<{
  readonly name: string
  readonly existing: string
  readonly requested: string
}> {
  override get message(): string {
    return `metric "${this.name}" is already registered as ${this.existing}, requested ${this.requested}`
  }
}

export class MetricsServerError extends Data.TaggedError("MetricsServerError")<{
  readonly host: string
  readonly port: number
  readonly cause: unknown
}> {
  override get message(): string {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `metrics server cannot listen on ${this.host}:${this.port}: ${reason}`
  }
}
