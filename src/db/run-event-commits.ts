/**
 * Announcing the commits that appended run events (./run-events.ts): after a transaction that appended events
 * commits, the environments it wrote to go to this process's listeners (`onRunEventsCommitted`: the SSE hub) — from
 * SQLite's commit (./sqlite/store.ts, ./sqlite/group-commit.ts) or PostgreSQL's (./postgres/op-runner.ts, which also tells the other instances:
 * ./postgres/run-events.ts). Part of the engine: both stores' commit paths use it, and neither knows the domain.
 */
import type { Database } from 'bun:sqlite'
import type { Db } from './dialect.ts'
import { connectionOf } from './sqlite/prepared.ts'
import type { RunEventsListener, Store } from './store.ts'

/** The environments SQLite's open transaction appended events to, per connection: announced once it commits. */
const appendedOn = new WeakMap<Database, Set<number>>()

/** SQLite: the connection behind `db` appended these events (their environments) in its open transaction. */
export function noteAppendedEvents(db: Db, events: readonly { environmentId: number }[]): void {
  const connection = connectionOf(db)
  const written = appendedOn.get(connection) ?? new Set<number>()
  for (const event of events) written.add(event.environmentId)
  appendedOn.set(connection, written)
}

/**
 * The environments the connection behind `db` appended events to since the last call (its transaction has just
 * ended); empty when none. A savepoint rolled back leaves its environments here: a listener woken for nothing reads
 * nothing new.
 */
export function takeAppendedEnvironments(db: Db): number[] {
  const connection = connectionOf(db)
  const written = appendedOn.get(connection)
  if (written === undefined) return []
  appendedOn.delete(connection)
  return [...written]
}

const listeners = new WeakMap<Store, Set<RunEventsListener>>()

/** Calls `listener` after each commit through this store that appended events; answers how to stop. */
export function onRunEventsCommitted(store: Store, listener: RunEventsListener): () => void {
  const set = listeners.get(store) ?? new Set<RunEventsListener>()
  listeners.set(store, set)
  set.add(listener)
  return () => void set.delete(listener)
}

/** After a commit: the environments it appended events to, to this process's listeners. */
export function announceRunEvents(store: Store, environmentIds: readonly number[]): void {
  if (environmentIds.length === 0) return
  for (const listener of listeners.get(store) ?? []) listener(environmentIds)
}
