import { InvalidMetricName } from "./errors.ts"

export type MetricKind = "counter" | "gauge" | "histogram"

const NAME = /^t1_[a-z][a-z0-9]*_[a-z0-9_]+$/

/** Throws {@link InvalidMetricName}: a bad name is a programming error, found at startup. */
export const validateMetricName = (name: string, kind: MetricKind): void => {
  const fail = (reason: string) => {
    throw new InvalidMetricName({ name, reason })
  }
  if (!NAME.test(name)) {
    fail("must match t1_<component>_<thing>_<unit> (lower case, digits and underscores)")
  }
  const total = name.endsWith("_total")
  // Prometheus reserves the _total suffix for counters; a gauge named so would be summed wrongly.
  if (kind === "counter" && !total) fail("a counter's name must end in _total")
  if (kind !== "counter" && total) fail(`only counters end in _total, this is a ${kind}`)
}
