/**
 * The gRPC gateway: t1.v1.JobService (submit, get, list, watch, cancel) over the job store
 * (services/jobs, shared with the coordinator), with bearer-token auth, validation,
 * grpc.health.v1 and server reflection; and a typed client (client.ts).
 */

export {
  authorize,
  parseTokens,
  type Role,
  type TokenGrant,
  type Tokens,
  TokensFileError,
} from "./auth.ts"
export type { CallRunner } from "./calls.ts"
export {
  bearer,
  channelCredentials,
  channelOptions,
  GatewayCallError,
  type JobServiceClient,
  type JobServiceClientOptions,
  jobServiceClient,
  jobServiceClientScoped,
  toCallError,
  unaryCaller,
} from "./client.ts"
export { GatewayStartError, PermissionDenied, Unauthenticated } from "./errors.ts"
export { codec, type ServiceHandlers, serviceDefinition } from "./grpc-adapter.ts"
export {
  GATEWAY_SERVICES,
  type GatewayContext,
  type GatewayEndpoint,
  type GatewayOptions,
  type GatewayService,
  type GatewayTls,
  runGateway,
  serveGateway,
} from "./server.ts"
export { ERROR_DETAIL_TRAILER, FIELD_PATH_TRAILER, StatusError } from "./status.ts"
export { validateJobId, validateJobSpec, validateRequestId } from "./validate.ts"
