import { randomUUID } from "node:crypto"
import type { BusMessage } from "./bus.ts"
import { subjectMatches } from "./subjects.ts"

interface Subscriber {
  readonly pattern: string
  readonly queue: string | undefined
  readonly deliver: (message: BusMessage) => void
}

/** Core publish/subscribe inside one process, with NATS queue-group semantics. */
export class MemoryPubSub {
  private readonly subscribers = new Set<Subscriber>()
  private nextGroupPick = 0

  subscribe(
    pattern: string,
    queue: string | undefined,
    deliver: (m: BusMessage) => void,
  ): () => void {
    const sub: Subscriber = { pattern, queue, deliver }
    this.subscribers.add(sub)
    return () => {
      this.subscribers.delete(sub)
    }
  }

  /** Returns the number of subscribers that received the message. */
  publish(message: BusMessage): number {
    const groups = new Map<string, Subscriber[]>()
    let delivered = 0
    for (const sub of this.subscribers) {
      if (!subjectMatches(sub.pattern, message.subject)) continue
      if (sub.queue === undefined) {
        sub.deliver(message)
        delivered++
      } else {
        const members = groups.get(sub.queue) ?? []
        members.push(sub)
        groups.set(sub.queue, members)
      }
    }
    for (const members of groups.values()) {
      const pick = members[this.nextGroupPick++ % members.length]
      if (pick !== undefined) {
        pick.deliver(message)
        delivered++
      }
    }
    return delivered
  }

  newInbox(): string {
    return `_INBOX.${randomUUID().replaceAll("-", "")}`
  }

  clear(): void {
    this.subscribers.clear()
  }
}
