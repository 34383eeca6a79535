import {
  create,
  type DescMessage,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf"
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2"
import type * as grpc from "@grpc/grpc-js"

/** The message type a schema decodes to. */
type Shape<D> = D extends DescMessage ? MessageShape<D> : never

/** The grpc-js handler type of one method, typed by its protobuf-es schemas. */
export type MethodHandler<M extends GenServiceMethods[string]> = M["methodKind"] extends "unary"
  ? grpc.handleUnaryCall<Shape<M["input"]>, Shape<M["output"]>>
  : M["methodKind"] extends "server_streaming"
    ? grpc.handleServerStreamingCall<Shape<M["input"]>, Shape<M["output"]>>
    : M["methodKind"] extends "client_streaming"
      ? grpc.handleClientStreamingCall<Shape<M["input"]>, Shape<M["output"]>>
      : grpc.handleBidiStreamingCall<Shape<M["input"]>, Shape<M["output"]>>

/** An implementation of a whole service, keyed by the methods' local names (`submitJob`). */
export type ServiceHandlers<S extends GenServiceMethods> = { [K in keyof S]: MethodHandler<S[K]> }

/** Binary protobuf (de)serialisers of one message type, as grpc-js calls them. */
export const codec = <D extends DescMessage>(schema: D) => ({
  // create() returns a message of this schema unchanged and builds one from a plain init object,
  // so that toBinary always sees a real message.
  serialize: (value: MessageShape<D> | MessageInitShape<D>): Buffer => {
    const bytes = toBinary(schema, create(schema, value))
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  },
  deserialize: (bytes: Buffer): MessageShape<D> => fromBinary(schema, bytes),
})

/**
 * A grpc-js service definition for a protobuf-es service descriptor: paths
 * `/<package>.<Service>/<Method>`, binary protobuf on the wire, every streaming kind.
 */
export const serviceDefinition = <S extends GenServiceMethods>(
  service: GenService<S>,
): grpc.ServiceDefinition<ServiceHandlers<S>> => {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {}
  for (const method of service.methods) {
    const input = codec(method.input)
    const output = codec(method.output)
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      originalName: method.name,
      requestStream:
        method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream:
        method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: input.serialize as (value: unknown) => Buffer,
      requestDeserialize: input.deserialize,
      responseSerialize: output.serialize as (value: unknown) => Buffer,
      responseDeserialize: output.deserialize,
    }
  }
  return definition as grpc.ServiceDefinition<ServiceHandlers<S>>
}
