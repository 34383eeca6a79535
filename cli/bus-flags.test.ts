import { afterEach, describe, expect, it } from "vitest"
import { natsOptionsFrom } from "./bus-flags.ts"
import { serveCommand } from "./commands/serve.ts"
import { upCommand } from "./commands/up.ts"
import { UsageError } from "./flags.ts"

const options = (values: Parameters<typeof natsOptionsFrom>[0]) =>
  natsOptionsFrom({ nats: "nats://127.0.0.1:4222", ...values }, "usage", "t1-test")

describe("--nats-inbox-prefix", () => {
  afterEach(() => {
    delete process.env.T1_NATS_INBOX_PREFIX
  })

  it("is _INBOX_<user> for a named user, so the server can confine each role to its replies", () => {
    expect(options({ "nats-user": "sampler" }).inboxPrefix).toBe("_INBOX_sampler")
  })

  it("is NATS's default without a user", () => {
    expect(options({}).inboxPrefix).toBeUndefined()
  })

  it("is taken from the flag, else T1_NATS_INBOX_PREFIX, before the user's", () => {
    process.env.T1_NATS_INBOX_PREFIX = "_INBOX_env"
    expect(options({ "nats-user": "sampler" }).inboxPrefix).toBe("_INBOX_env")
    expect(
      options({ "nats-user": "sampler", "nats-inbox-prefix": "replies.sampler-2" }).inboxPrefix,
    ).toBe("replies.sampler-2")
  })

  it("refuses a prefix that is not subject tokens, and a user that cannot name one", () => {
    for (const bad of ["_INBOX.>", "a b", "a..b", "*"])
      expect(() => options({ "nats-inbox-prefix": bad })).toThrow(UsageError)
    expect(() => options({ "nats-user": "svc@example" })).toThrow(/--nats-inbox-prefix/)
    expect(
      options({ "nats-user": "svc@example", "nats-inbox-prefix": "_INBOX_svc" }),
    ).toMatchObject({ inboxPrefix: "_INBOX_svc" })
  })
})

describe("--nats-replicas", () => {
  afterEach(() => {
    delete process.env.T1_NATS_REPLICAS
  })

  it("is 1 unless given, and is taken from the flag, else T1_NATS_REPLICAS", () => {
    expect(options({}).replicas).toBe(1)
    process.env.T1_NATS_REPLICAS = "3"
    expect(options({}).replicas).toBe(3)
    expect(options({ "nats-replicas": "5" }).replicas).toBe(5)
  })

  it("refuses 0, negatives, fractions, words and more than JetStream's 5, saying why", () => {
    for (const bad of ["0", "-1", "1.5", "three", "6", " 3"])
      expect(() => options({ "nats-replicas": bad })).toThrow(
        /--nats-replicas must be an integer from 1 to 5/,
      )
    process.env.T1_NATS_REPLICAS = "0"
    expect(() => options({})).toThrow(UsageError)
  })
})

describe("--nats-replicas without NATS", () => {
  it("is refused by t1 up and t1 serve, whose bus is then in memory", () => {
    const saved = process.env.T1_NATS_URL
    delete process.env.T1_NATS_URL
    try {
      for (const command of [upCommand, serveCommand])
        expect(() => command(["--nats-replicas", "3"])).toThrow(
          /--nats-replicas applies to NATS streams: pass --nats/,
        )
    } finally {
      if (saved !== undefined) process.env.T1_NATS_URL = saved
    }
  })
})
