import { useNatsServer } from "../../test/support/nats-url.ts"
import { busContract } from "./bus.contract.ts"
import { NatsBusLive } from "./nats.ts"

const nats = useNatsServer()

busContract("NATS", () => NatsBusLive({ servers: nats.url, name: "t1-contract-test" }))
