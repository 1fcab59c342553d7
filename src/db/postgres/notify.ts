/**
 * Notifications to every instance, sent after the commits they announce, never inside them: PostgreSQL serializes the
 * commits of every transaction that notifies (one lock for the whole cluster, taken at commit, so that its queue of
 * notifications follows commit order), and a trigger's or a step's commit would wait on every other one's. A
 * transaction names the channels its commit should wake (`notifyOnCommit`, kept beside its list locks: ./monotonic.ts);
 * once it committed, its store sends them (`notifySoon`): at the end of the turn of the event loop when the pool sent
 * none in the last `NOTIFY_EVERY_MS`, else when that time is up — one NOTIFY per channel for every commit meanwhile.
 * Each NOTIFY is a transaction of its own that every listening connection of the cluster reads: under load, one for
 * many commits. A notification lost to a crash between the commit and the NOTIFY, or sent while a
 * listener reconnects, is made up by the listeners' own periodic reads (the executor's poll, the delivery worker's,
 * the deadline timer's, the event streams').
 */
import type { SQL } from 'bun'

/** PostgreSQL refuses a payload of 8,000 bytes or more: past this, the payload is empty ("anything"). */
const MAX_PAYLOAD = 7_000

/**
 * The least time between two sends of a pool's notifications. A wake-up comes that much later at most, and only under
 * load: a pool that sent none for that long sends at the end of the turn.
 */
export const NOTIFY_EVERY_MS = 10

/** Per pool, the channels to notify at the next send, each with the payload parts gathered so far. */
const pending = new WeakMap<SQL, Map<string, Set<string | number>>>()
/** Per pool, when it last sent its notifications (performance.now()). */
const lastSent = new WeakMap<SQL, number>()

/** How long until the pool `sql` may send again (0 or less: now). */
function untilNextSend(sql: SQL): number {
  return NOTIFY_EVERY_MS - (performance.now() - (lastSent.get(sql) ?? -Infinity))
}

/**
 * Sends `NOTIFY channel` on the pool `sql` soon (see above), once for every call until then: its payload the parts of
 * every call, comma-separated (a call without parts adds none; none at all: an empty payload).
 */
export function notifySoon(sql: SQL, channel: string, parts: Iterable<string | number> = []): void {
  let channels = pending.get(sql)
  if (channels === undefined) {
    const gathered = new Map<string, Set<string | number>>()
    channels = gathered
    pending.set(sql, gathered)
    const send = () => {
      // A timer counts from the event loop's time at its turn's start, so on a loaded machine it can fire before its
      // wait is up (even at once): then it waits for the rest.
      const early = untilNextSend(sql)
      if (early > 0) return void setTimeout(send, early)
      pending.delete(sql)
      lastSent.set(sql, performance.now())
      for (const [name, payloadParts] of gathered) {
        const payload = [...payloadParts].join(',')
        // Lost (the server unreachable): the listeners' periodic reads find what it announced.
        sql.notify(name, payload.length > MAX_PAYLOAD ? '' : payload).catch(() => {})
      }
    }
    const wait = untilNextSend(sql)
    if (wait > 0) setTimeout(send, wait)
    else setImmediate(send)
  }
  let gathered = channels.get(channel)
  if (gathered === undefined) {
    gathered = new Set()
    channels.set(channel, gathered)
  }
  for (const part of parts) gathered.add(part)
}
