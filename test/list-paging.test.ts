/**
 * createdAt filters answer from id ranges while a list is in time order, and from plain comparisons once an
 * import broke that order. Both paths must return exactly what a brute-force filter over the rows returns,
 * for every operator at every stored time (ties included) and around them.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { environments } from '../src/db/schema.ts'
import { DATE_OPERATORS, parseDateFilters } from '../src/http/list.ts'
import { ACTIVITY_DATE_FIELDS } from '../src/modules/activity-logs/query.ts'
import { NOTE_DATE_FIELDS } from '../src/modules/notes/model.ts'
import { appendActivityLog, listActivityLogIds } from '../src/modules/activity-logs/service.ts'
import { createNote, listNoteIds, recordImportedNoteTime } from '../src/modules/notes/service.ts'
import { commitNow } from '../src/db/write.ts'
import { acmeDocument, applyAcme, projectId, userId } from './support/acme.ts'
import { testEnv, runNow } from './helpers.ts'

const env = testEnv()
afterAll(() => env.cleanup())
applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: 'http://trellis.test' }, acmeDocument())
const acme = projectId(env.store, 'Acme')
const production = env.store.db.select().from(environments).where(eq(environments.name, 'production')).get()!
const alice = userId(env.store, 'alice')

function bruteForce(rows: { id: number; createdAt: number }[], op: string, at: number, limit: number): number[] {
  const keep = { eq: (t: number) => t === at, lt: (t: number) => t < at, lte: (t: number) => t <= at, gt: (t: number) => t > at, gte: (t: number) => t >= at }[op]!
  return rows
    .filter((r) => keep(r.createdAt))
    .map((r) => r.id)
    .sort((a, b) => b - a)
    .slice(0, limit + 1)
}

function noteRows() {
  return env.store.sqlite
    .prepare('SELECT id, created_at AS createdAt FROM notes WHERE environment_id = ?')
    .all(production.id) as { id: number; createdAt: number }[]
}

function checkEveryBoundary(rows: { id: number; createdAt: number }[], list: (query: Record<string, string>, limit: number) => number[]) {
  const times = [...new Set(rows.map((r) => r.createdAt))]
  const probes = [...times, ...times.map((t) => t - 1), ...times.map((t) => t + 1)]
  let checked = 0
  for (const at of probes) {
    for (const op of DATE_OPERATORS) {
      for (const limit of [1, 7, 100]) {
        expect({ op, at, limit, ids: list({ [`createdAt.${op}`]: new Date(at).toISOString() }, limit) }).toEqual({
          op,
          at,
          limit,
          ids: bruteForce(rows, op, at, limit),
        })
        checked++
      }
    }
  }
  return checked
}

describe('notes', () => {
  test('in time order (created through Trellis, many in the same millisecond): id ranges, exact', () => {
    for (let i = 0; i < 60; i++) {
      if (i % 4 === 0) env.clock.advance(5) // otherwise the clock stands still: +1 ms per note
      commitNow(env.store, function* () {
            return yield* createNote(env.clock, { environmentId: production.id, teamId: 1, collectionId: 1, recordId: `r${i % 5}`, title: `n${i}`, content: '<p>x</p>' }, { userId: alice, tokenId: null })
          },
      )
    }
    expect(env.store.db.select().from(environments).where(eq(environments.id, production.id)).get()!.notesInTimeOrder).toBe(true)
    const checked = checkEveryBoundary(noteRows(), (query, limit) => runNow(env.store, listNoteIds(acme, production.id, {}, parseDateFilters(query, NOTE_DATE_FIELDS), limit)))
    expect(checked).toBeGreaterThan(1000)
    // combined with another filter and two bounds
    const rows = noteRows()
    const mid = rows[30]!.createdAt
    const expected = rows.filter((r) => r.createdAt < mid && r.createdAt >= rows[10]!.createdAt).map((r) => r.id).sort((a, b) => b - a)
    expect((runNow(env.store, listNoteIds(acme, production.id, {}, parseDateFilters({ 'createdAt.lt': new Date(mid).toISOString(), 'createdAt.gte': new Date(rows[10]!.createdAt).toISOString() }, NOTE_DATE_FIELDS), 100)))).toEqual(expected)
  })

  test('an import of an older note switches the environment to the exact slow path', () => {
    const old = Date.UTC(2020, 0, 1)
    commitNow(env.store, function* () {
              yield* recordImportedNoteTime(production.id, old)
              // An imported note, as apply writes it: a given time older than every other note, and the highest id.
              env.store.sqlite
                .prepare("INSERT INTO notes (environment_id, team_id, collection_id, record_id, title, user_id, created_at, updated_at) VALUES (?, 1, 1, 'old', 'imported', ?, ?, ?)")
                .run(production.id, alice, old, old)
            })
    expect(env.store.db.select().from(environments).where(eq(environments.id, production.id)).get()!.notesInTimeOrder).toBe(false)
    checkEveryBoundary(noteRows(), (query, limit) => runNow(env.store, listNoteIds(acme, production.id, {}, parseDateFilters(query, NOTE_DATE_FIELDS), limit)))
  })
})

describe('activity logs', () => {
  test('entries written while the clock stands still get distinct, increasing times: id ranges stay exact', () => {
    for (let i = 0; i < 40; i++) {
      if (i % 5 === 0) env.clock.advance(3)
      commitNow(env.store, function* () {
            return yield* appendActivityLog(env.clock, { environmentId: production.id, type: 'write', action: 'update', userId: alice, teamId: 1, collectionId: 1, recordIds: ['x'] })
          },
      )
    }
    const rows = env.store.sqlite
      .prepare('SELECT id, created_at AS createdAt FROM activity_logs WHERE environment_id = ?')
      .all(production.id) as { id: number; createdAt: number }[]
    checkEveryBoundary(rows, (query, limit) => runNow(env.store, listActivityLogIds(acme, production.id, { extensions: true }, parseDateFilters(query, ACTIVITY_DATE_FIELDS), limit)))
    expect(rows.length).toBeGreaterThan(40)
  })
})
