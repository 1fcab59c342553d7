/**
 * LISTEN through Bun's client (`sql.listen`: every channel of one pool shares one dedicated connection beside it,
 * re-subscribed after a reconnect). Used for the queue's wake-ups (./queue.ts) and run events (./run-events.ts).
 */
import type { SQL } from 'bun'

/**
 * Calls `heard` with each notification's payload on `channel`, and with null after a dropped listening connection is
 * back (notifications sent meanwhile are lost: the listener catches up). Resolves once the server listens.
 */
export async function listenOn(sql: SQL, channel: string, heard: (payload: string | null) => void): Promise<{ stop(): Promise<void> }> {
  let subscribed = false
  const subscription = await sql.listen(channel, (payload) => heard(payload), () => {
    if (subscribed) heard(null)
    subscribed = true
  })
  return { stop: () => subscription.unlisten() }
}
