import { useNatsServer } from "../../test/support/nats-url.ts"
import { NatsBusLive } from "../bus/index.ts"
import { jobStoreContract } from "./store.contract.ts"

const nats = useNatsServer()

jobStoreContract("NATS", () => NatsBusLive({ servers: nats.url, name: "t1-jobs-test" }))
