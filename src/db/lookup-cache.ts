/**
 * The lookups nearly every request makes and that almost never change — a token by its hash (with its user, project
 * and role), a webhook's trigger target, a project and an environment by name, whether a user reaches a team's
 * renderings, and the executor's: a run's workflow and place — cached, with exact invalidation
 * (docs/design-decisions.md "Lookup cache"). A lookup is written once
 * as an op (`cached`); each store's runner answers it from its own cache: SQLite's per connection
 * (./sqlite/lookup-cache.ts: its own writes and other connections' commits seen at once), PostgreSQL's per instance
 * (./postgres/lookup-cache.ts: every instance's commits seen through a generation row). Inside a transaction neither
 * uses its cache, and misses (an unknown token) are never cached.
 */
import type { Op } from './op.ts'

/** Entries kept per kind of lookup; beyond, that kind starts over (a bound, not an eviction policy). */
const MAX_ENTRIES = 10_000

/**
 * `work`'s answer for `key` as an op, written once for both stores: SQLite answers from this connection's cache
 * (run by ./sqlite/op-runner.ts); PostgreSQL from the instance's (run by ./postgres/op-runner.ts).
 */
export function* cached<V>(kind: string, key: string | number, work: Op<V | undefined>): Op<V | undefined> {
  return (yield { kind: 'cached', lookup: kind, key, work }) as V | undefined
}

/** One kind of lookup's entries in a cache's map of kinds (made on first use); both stores' caches use it. */
export function entriesOfKind(kinds: Map<string, Map<unknown, unknown>>, kind: string): Map<unknown, unknown> {
  let entries = kinds.get(kind)
  if (!entries) kinds.set(kind, (entries = new Map()))
  return entries
}

/** Keeps a found answer: at most MAX_ENTRIES per kind (beyond, the kind starts over), frozen. */
export function keepAnswer(entries: Map<unknown, unknown>, key: unknown, value: unknown): void {
  if (entries.size >= MAX_ENTRIES) entries.clear()
  // Shared by every later request: frozen, so no caller can change what the next one reads.
  entries.set(key, Object.freeze(value))
}
