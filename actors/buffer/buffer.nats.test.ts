import { NatsBusLive } from "../../services/bus/index.ts"
import { useNatsServer } from "../../test/support/nats-url.ts"
import { bufferContract } from "./buffer.contract.ts"

const nats = useNatsServer()

bufferContract("NATS", () => NatsBusLive({ servers: nats.url, name: "t1-buffer-test" }))
