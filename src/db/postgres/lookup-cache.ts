/**
 * The lookup cache on PostgreSQL: the same lookups as SQLite's (../sqlite/lookup-cache.ts — a token by its hash,
 * a webhook's trigger target, a project and an environment by name, whether a user reaches a team's renderings, a
 * run's workflow and place), cached per instance, with exact invalidation across instances.
 *
 * Several instances share the database, so no instance sees another's writes by itself. Every committed change of a
 * table those lookups read moves one generation number on (drizzle/postgres/0009_lookup_generation.sql: a deferred
 * trigger per table, on the same tables and columns as SQLite's WATCHED). Before answering from its cache, an
 * instance reads that number — one single-row statement — and empties the cache when it moved. A change committed
 * before a request arrived is therefore seen by that request, whichever instance made it: the read that decides was
 * sent after the request arrived, and under READ COMMITTED it sees every commit before it. So a read is shared by the
 * lookups made during the turn of the event loop it was sent in, and, within a served request
 * (../../lib/request-arrival.ts), the newest read sent after the request arrived serves its later lookups too — a
 * trigger's token, trigger target and rendering check cost one read, not three. The number only moves forward: an
 * answer older than the cache's entries neither reads nor fills them, and an answer loaded while the number moved
 * is not kept. Inside a transaction the cache is not used (as on SQLite). Misses are never cached.
 */
import { PgTransaction } from 'drizzle-orm/pg-core'
import { arrivalOfThisRequest } from '../../lib/request-arrival.ts'
import { entriesOfKind, keepAnswer } from '../lookup-cache.ts'
import { clientOf, type PgDb } from './client.ts'

interface Cache {
  /** The generation the entries were read at (-1: none yet). */
  generation: number
  entries: Map<string, Map<unknown, unknown>>
  /** This turn's read of the generation, shared by the lookups made during it. */
  thisTurn: Promise<number | null> | null
  /** The answer of the read sent last (by when it was sent), for the later lookups of requests that arrived before. */
  latest: { generation: number; sentAt: number } | null
}

const caches = new WeakMap<PgDb, Cache>()

/** `load()`'s answer for `key` (the work of ../lookup-cache.ts's `cached`), from this instance's cache when still exact. */
export async function cachedLookupOnPostgres<V>(db: PgDb, kind: string, key: string | number, load: () => Promise<V | undefined>): Promise<V | undefined> {
  if (db instanceof PgTransaction) return load()
  let cache = caches.get(db)
  if (!cache) caches.set(db, (cache = { generation: -1, entries: new Map(), thisTurn: null, latest: null }))
  const generation = await generationFor(db, cache)
  if (generation === null || generation < cache.generation) return load()
  if (generation > cache.generation) {
    cache.entries.clear()
    cache.generation = generation
  }
  const entries = entriesOfKind(cache.entries, kind)
  const hit = entries.get(key) as V | undefined
  if (hit !== undefined) return hit
  const value = await load()
  // Kept only if nothing moved while it loaded (a later turn may have seen a newer generation and emptied the cache).
  if (value !== undefined && cache.generation === generation) keepAnswer(entries, key, value)
  return value
}

/**
 * A generation read after the request being served arrived: the newest answer when it was sent after that, else this
 * turn's read. Null when it cannot be read (a schema before 0009).
 */
function generationFor(db: PgDb, cache: Cache): number | null | Promise<number | null> {
  const arrived = arrivalOfThisRequest()
  const latest = cache.latest
  if (arrived !== undefined && latest !== null && latest.sentAt >= arrived) return latest.generation
  return generationThisTurn(db, cache)
}

/** The generation, read once per turn of the event loop. */
function generationThisTurn(db: PgDb, cache: Cache): Promise<number | null> {
  if (cache.thisTurn) return cache.thisTurn
  const sentAt = performance.now()
  const read = readGeneration(db).then((generation) => {
    if (generation !== null && (cache.latest === null || sentAt > cache.latest.sentAt)) cache.latest = { generation, sentAt }
    return generation
  })
  cache.thisTurn = read
  setImmediate(() => {
    if (cache.thisTurn === read) cache.thisTurn = null
  })
  return read
}

async function readGeneration(db: PgDb): Promise<number | null> {
  try {
    const [row] = (await clientOf(db)`SELECT n FROM lookup_generation WHERE id = 1`) as { n: string | number }[]
    return row === undefined ? null : Number(row.n)
  } catch {
    return null
  }
}
