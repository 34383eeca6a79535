/** The pool folder's surface: what other folders may import. */
export { type PoolOptions, poolMembership, runJobPool } from "./claim.ts"
export { jobOf, POOL_FLAGS, poolOptions } from "./flags.ts"
