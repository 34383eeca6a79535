import { randomUUID } from "node:crypto"
import { create, toBinary } from "@bufbuild/protobuf"
import { Clock, Effect } from "effect"
import { type Ping, PingSchema, PongSchema } from "../../proto/index.ts"
import { type ActorSpec, protobufDecoder } from "../../services/actor/index.ts"

/** Identifies this process in Pongs for its whole life. */
export const INSTANCE_ID = randomUUID()

/**
 * Answers every Ping on the bus with a Pong naming the actor this process hosts, so operators
 * (`t1 ping`) and health checks can tell that the bus and an actor are both alive.
 */
export const diagnosticActor = (
  pingSubject: string,
  hosted: string,
): ActorSpec<Ping, never, never> => ({
  name: "diagnostic",
  // No queue group: every process answers, so a request reaches whichever is quickest.
  mailbox: { kind: "subscription", subject: pingSubject },
  decode: protobufDecoder(PingSchema),
  handle: (ping, delivery) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      delivery.respond(
        toBinary(
          PongSchema,
          create(PongSchema, {
            nonce: ping.nonce,
            actor: hosted,
            instanceId: INSTANCE_ID,
            receivedUnixMs: BigInt(now),
            pingSentUnixMs: ping.sentUnixMs,
          }),
        ),
      ),
    ),
})
