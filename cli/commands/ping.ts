import { randomUUID } from "node:crypto"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { PingSchema, PongSchema } from "../../proto/index.ts"
import { Bus, NatsBusLive, subjectsFor } from "../../services/bus/index.ts"
import { natsFlagSpec, natsFlagsHelp, natsOptionsFrom, prefixFrom } from "../bus-flags.ts"
import { intFlag, parseFlags, UsageError } from "../flags.ts"

export const pingUsage = () => `Usage: t1 ping [options]

Sends Ping to <prefix>.ping and prints the Pong of the first actor process that answers, with the
round-trip time. Exits 1 when no actor answers.

Options:
  --count N          pings to send (default 1)
  --timeout-ms MS    wait for each Pong (default 2000)
  --json             print one JSON object per Pong
${natsFlagsHelp}`

const spec = {
  ...natsFlagSpec,
  count: { type: "string" },
  "timeout-ms": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

export const pingCommand = (args: ReadonlyArray<string>): Effect.Effect<void, unknown> | string => {
  const usage = pingUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  if (positionals.length > 0)
    throw new UsageError(`unexpected arguments: ${positionals.join(" ")}`, usage)
  const count = intFlag("count", values.count, 1, usage, 1)
  const timeoutMs = intFlag("timeout-ms", values["timeout-ms"], 2000, usage, 1)
  const nats = natsOptionsFrom({ "nats-connect-attempts": "3", ...values }, usage, "t1-ping")
  const subjects = subjectsFor(prefixFrom(values, usage))
  return Effect.gen(function* () {
    const bus = yield* Bus
    for (let i = 0; i < count; i++) {
      const sent = Date.now()
      const nonce = randomUUID()
      const reply = yield* bus.request(
        subjects.ping,
        toBinary(PingSchema, create(PingSchema, { nonce, sentUnixMs: BigInt(sent) })),
        { timeoutMs },
      )
      const pong = fromBinary(PongSchema, reply.data)
      const rttMs = Date.now() - sent
      if (pong.nonce !== nonce) return yield* Effect.fail(new Error("Pong answered another Ping"))
      console.log(
        values.json === true
          ? JSON.stringify({ actor: pong.actor, instance_id: pong.instanceId, rtt_ms: rttMs })
          : `pong from ${pong.actor} (${pong.instanceId}) in ${rttMs} ms`,
      )
    }
  }).pipe(Effect.scoped, Effect.provide(NatsBusLive(nats)))
}
