import { type DescMessage, fromBinary, type MessageShape } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { MalformedMessage } from "./errors.ts"

/** Decodes a protobuf payload; garbage becomes a MalformedMessage, never a defect. */
export const protobufDecoder =
  <Desc extends DescMessage>(schema: Desc) =>
  (bytes: Uint8Array): Effect.Effect<MessageShape<Desc>, MalformedMessage> =>
    Effect.try({
      try: () => fromBinary(schema, bytes),
      catch: (cause) =>
        new MalformedMessage({
          kind: "protobuf",
          reason: `not a ${schema.typeName}: ${cause instanceof Error ? cause.message : String(cause)}`,
        }),
    })
