import { NatsBusLive } from "../../services/bus/index.ts"
import { useNatsServer } from "../../test/support/nats-url.ts"
import { coordinatorContract } from "./coordinator.contract.ts"

const nats = useNatsServer()

coordinatorContract("NATS", () => NatsBusLive({ servers: nats.url, name: "t1-coordinator-test" }))
