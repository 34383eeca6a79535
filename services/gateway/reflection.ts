import {
  create,
  type DescEnum,
  type DescFile,
  type DescMessage,
  type DescService,
  toBinary,
} from "@bufbuild/protobuf"
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt"
import * as grpc from "@grpc/grpc-js"
import type { CallRunner } from "./calls.ts"
import * as v1 from "./gen/grpc/reflection/v1/reflection_pb.ts"
import * as v1alpha from "./gen/grpc/reflection/v1alpha/reflection_pb.ts"
import type { ServiceHandlers } from "./grpc-adapter.ts"

export { v1 as reflectionV1, v1alpha as reflectionV1alpha }

/** A reflection request, v1 or v1alpha (the two are the same message in two packages). */
interface RequestLike {
  readonly host: string
  readonly messageRequest:
    | { readonly case: "fileByFilename"; readonly value: string }
    | { readonly case: "fileContainingSymbol"; readonly value: string }
    | {
        readonly case: "fileContainingExtension"
        readonly value: { readonly containingType: string; readonly extensionNumber: number }
      }
    | { readonly case: "allExtensionNumbersOfType"; readonly value: string }
    | { readonly case: "listServices"; readonly value: string }
    | { readonly case: undefined; readonly value?: undefined }
}

type Answer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | {
      case: "allExtensionNumbersResponse"
      value: { baseTypeName: string; extensionNumber: number[] }
    }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } }

/**
 * What server reflection answers from: the served services' names and the files that declare
 * them, with their imports (FileDescriptorProtos as protobuf-es embeds them).
 */
export const reflectionIndex = (
  files: ReadonlyArray<DescFile>,
  services: ReadonlyArray<string>,
) => {
  const byName = new Map<string, DescFile>()
  const bySymbol = new Map<string, DescFile>()
  const encoded = new Map<DescFile, Uint8Array>()

  const addEnum = (file: DescFile, e: DescEnum) => bySymbol.set(e.typeName, file)
  const addMessage = (file: DescFile, m: DescMessage) => {
    bySymbol.set(m.typeName, file)
    for (const f of m.fields) bySymbol.set(`${m.typeName}.${f.name}`, file)
    for (const o of m.oneofs) bySymbol.set(`${m.typeName}.${o.name}`, file)
    for (const n of m.nestedMessages) addMessage(file, n)
    for (const e of m.nestedEnums) addEnum(file, e)
    for (const x of m.nestedExtensions) bySymbol.set(x.typeName, file)
  }
  const addService = (file: DescService["file"], s: DescService) => {
    bySymbol.set(s.typeName, file)
    for (const m of s.methods) bySymbol.set(`${s.typeName}.${m.name}`, file)
  }
  const addFile = (file: DescFile) => {
    if (byName.has(file.proto.name)) return
    byName.set(file.proto.name, file)
    encoded.set(file, toBinary(FileDescriptorProtoSchema, file.proto))
    for (const m of file.messages) addMessage(file, m)
    for (const e of file.enums) addEnum(file, e)
    for (const x of file.extensions) bySymbol.set(x.typeName, file)
    for (const s of file.services) addService(file, s)
    for (const d of file.dependencies) addFile(d)
  }
  for (const f of files) addFile(f)

  /** The file first, then everything it imports, each once. */
  const withImports = (file: DescFile): Uint8Array[] => {
    const seen = new Set<DescFile>()
    const out: Uint8Array[] = []
    const visit = (f: DescFile) => {
      if (seen.has(f)) return
      seen.add(f)
      const bytes = encoded.get(f)
      if (bytes !== undefined) out.push(bytes)
      for (const d of f.dependencies) visit(d)
    }
    visit(file)
    return out
  }

  const notFound = (what: string): Answer => ({
    case: "errorResponse",
    value: { errorCode: grpc.status.NOT_FOUND, errorMessage: `${what} not found` },
  })

  const answer = (request: RequestLike): Answer => {
    const r = request.messageRequest
    switch (r.case) {
      case "listServices":
        return {
          case: "listServicesResponse",
          value: { service: services.map((name) => ({ name })) },
        }
      case "fileByFilename": {
        const file = byName.get(r.value)
        return file === undefined
          ? notFound(`file ${r.value}`)
          : { case: "fileDescriptorResponse", value: { fileDescriptorProto: withImports(file) } }
      }
      case "fileContainingSymbol": {
        const file = bySymbol.get(r.value.replace(/^\./, ""))
        return file === undefined
          ? notFound(`symbol ${r.value}`)
          : { case: "fileDescriptorResponse", value: { fileDescriptorProto: withImports(file) } }
      }
      case "allExtensionNumbersOfType":
        // No served file declares extensions.
        return bySymbol.has(r.value)
          ? {
              case: "allExtensionNumbersResponse",
              value: { baseTypeName: r.value, extensionNumber: [] },
            }
          : notFound(`type ${r.value}`)
      case "fileContainingExtension":
        return notFound(`extension ${r.value.extensionNumber} of ${r.value.containingType}`)
      default:
        return {
          case: "errorResponse",
          value: { errorCode: grpc.status.INVALID_ARGUMENT, errorMessage: "empty request" },
        }
    }
  }

  return { answer, files: [...byName.keys()] }
}

export type ReflectionIndex = ReturnType<typeof reflectionIndex>

/** grpc.reflection.v1 and v1alpha ServerReflection over the same index. */
export const reflectionHandlers = (runner: CallRunner, index: ReflectionIndex) => {
  const v1Handlers: ServiceHandlers<(typeof v1.ServerReflection)["method"]> = {
    serverReflectionInfo: runner.duplex("ServerReflection/ServerReflectionInfo", (request) =>
      create(v1.ServerReflectionResponseSchema, {
        validHost: request.host,
        originalRequest: request,
        messageResponse: index.answer(request),
      }),
    ),
  }
  const v1alphaHandlers: ServiceHandlers<(typeof v1alpha.ServerReflection)["method"]> = {
    serverReflectionInfo: runner.duplex("ServerReflection/ServerReflectionInfo", (request) =>
      create(v1alpha.ServerReflectionResponseSchema, {
        validHost: request.host,
        originalRequest: request,
        messageResponse: index.answer(request),
      }),
    ),
  }
  return { v1: v1Handlers, v1alpha: v1alphaHandlers }
}
