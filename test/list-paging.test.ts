/**
 * createdAt filters answer from id ranges while a list is in time order, and from plain comparisons once an
 * import broke that order. Both paths must return exactly what a brute-force filter over the rows returns,
 * for every operator at every stored time (ties included) and around them.
 */
import { DEFAULT_LIVE_TOKENS_PER_USER } from '../src/config.ts'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { DATE_OPERATORS, parseDateFilters, parseStringParameter, queryOf } from '../src/http/list.ts'
import { ACTIVITY_DATE_FIELDS } from '../src/modules/activity-logs/query.ts'
import { NOTE_DATE_FIELDS } from '../src/modules/notes/model.ts'
import { appendActivityLog, appendActivityLogNow, listActivityLogIds } from '../src/modules/activity-logs/service.ts'
import { createNote, listNoteIds, recordImportedNoteTime } from '../src/modules/notes/service.ts'
import { writeNow } from '../src/db/write.ts'
import { insertImportedNote } from '../src/db/notes.ts'
import { type Micros, microsFromMillis, toIsoMicros } from '../src/lib/time.ts'
import { acmeDocument, acmeProject, applyAcme, projectId, userId } from './support/acme.ts'
import { bearer, listReadable, queryAll, queryOne, runNow, TEST_STORE, testApp, testEnv } from './helpers.ts'
import { systemClock } from '../src/lib/clock.ts'
import { createToken } from '../src/modules/tokens/service.ts'

const env = testEnv()
afterAll(() => env.cleanup())
await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: 'http://trellis.test' }, acmeDocument())
const acme = projectId(env.store, 'Acme')
const production = queryOne<{ id: number }>(env.store, "SELECT id FROM environments WHERE project_id = ? AND name = 'production'", acme)!
const alice = userId(env.store, 'alice')

/**
 * The exhaustive checks below ask a list about 2,000 times: within bun's default 5 s on SQLite, but on PostgreSQL
 * each ask is a round trip (seconds on an idle machine), so they get room that holds on a loaded 2-core machine too.
 */
const EXHAUSTIVE_MS = 120_000

function bruteForce(rows: { id: number; createdAt: number }[], op: string, at: number, limit: number): number[] {
  const keep = { eq: (t: number) => t === at, lt: (t: number) => t < at, lte: (t: number) => t <= at, gt: (t: number) => t > at, gte: (t: number) => t >= at }[op]!
  return rows
    .filter((r) => keep(r.createdAt))
    .map((r) => r.id)
    .sort((a, b) => b - a)
    .slice(0, limit + 1)
}

/** Whether production's notes are in time order (the fast exact path), as the database holds it (0/1 or a boolean). */
function notesInTimeOrder(): boolean {
  return Boolean(queryOne<{ v: unknown }>(env.store, 'SELECT notes_in_time_order AS v FROM environments WHERE id = ?', production.id)!.v)
}

function noteRows() {
  return queryAll(env.store, 'SELECT id, created_at AS "createdAt" FROM notes WHERE environment_id = ?', production.id) as { id: number; createdAt: number }[]
}

async function checkEveryBoundary(rows: { id: number; createdAt: number }[], list: (query: Record<string, string>, limit: number) => Promise<number[]>) {
  const times = [...new Set(rows.map((r) => r.createdAt))]
  const probes = [...times, ...times.map((t) => t - 1), ...times.map((t) => t + 1)]
  let checked = 0
  for (const at of probes) {
    for (const op of DATE_OPERATORS) {
      for (const limit of [1, 7, 100]) {
        expect({ op, at, limit, ids: await list({ [`createdAt.${op}`]: toIsoMicros(at as Micros) }, limit) }).toEqual({
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

test('the query string: the first value of each parameter, whatever its name (constructor, __proto__, toString are names like any other)', () => {
  const query = queryOf(new Request('http://trellis.test/x?constructor=a&constructor=b&__proto__=c&limit=5&limit=6'))
  expect(Object.entries(query)).toEqual([['constructor', 'a'], ['__proto__', 'c'], ['limit', '5']])
  expect(parseStringParameter(query, 'constructor')).toBe('a')
  expect(parseStringParameter(query, 'toString')).toBeUndefined()
  expect(parseStringParameter(queryOf(new Request('http://trellis.test/x')), 'constructor')).toBeUndefined()
})

describe('notes', () => {
  test('in time order (created through Trellis, many in the same millisecond): id ranges, exact', async () => {
    for (let i = 0; i < 60; i++) {
      if (i % 4 === 0) env.clock.advance(5) // otherwise the clock stands still: +1 µs per note
      await writeNow(env.store, function* () {
            return yield* createNote(env.clock, { environmentId: production.id, teamId: 1, collectionId: 1, recordId: `r${i % 5}`, title: `n${i}`, content: '<p>x</p>' }, { userId: alice, tokenId: null })
          },
      )
    }
    await listReadable(env.store, 'notes') // PostgreSQL: dated by the lists' pass
    expect(notesInTimeOrder()).toBe(true)
    const checked = await checkEveryBoundary(noteRows(), (query, limit) => runNow(env.store, listNoteIds(acme, production.id, {}, parseDateFilters(query, NOTE_DATE_FIELDS), limit)))
    expect(checked).toBeGreaterThan(1000)
    // combined with another filter and two bounds
    const rows = noteRows()
    const mid = rows[30]!.createdAt
    const expected = rows.filter((r) => r.createdAt < mid && r.createdAt >= rows[10]!.createdAt).map((r) => r.id).sort((a, b) => b - a)
    expect((await runNow(env.store, listNoteIds(acme, production.id, {}, parseDateFilters({ 'createdAt.lt': toIsoMicros(mid as Micros), 'createdAt.gte': toIsoMicros(rows[10]!.createdAt as Micros) }, NOTE_DATE_FIELDS), 100)))).toEqual(expected)
  }, EXHAUSTIVE_MS)

  test('an import of an older note switches the environment to the exact slow path', async () => {
    const old = microsFromMillis(Date.UTC(2020, 0, 1))
    // An imported note, as apply writes it: a given time older than every other note, and the highest id.
    await writeNow(env.store, function* () {
      yield* recordImportedNoteTime(production.id, old)
      yield* insertImportedNote({ environmentId: production.id, teamId: 1, collectionId: 1, recordId: 'old', title: 'imported', userId: alice, createdAt: old, updatedAt: old }, [], true)
    })
    await listReadable(env.store, 'notes')
    expect(notesInTimeOrder()).toBe(false)
    await checkEveryBoundary(noteRows(), (query, limit) => runNow(env.store, listNoteIds(acme, production.id, {}, parseDateFilters(query, NOTE_DATE_FIELDS), limit)))
  }, EXHAUSTIVE_MS)
})

describe('activity logs', () => {
  test('entries written while the clock stands still get distinct, increasing times: id ranges stay exact', async () => {
    for (let i = 0; i < 40; i++) {
      if (i % 5 === 0) env.clock.advance(3)
      await writeNow(env.store, function* () {
            return yield* appendActivityLog(env.clock, { environmentId: production.id, type: 'write', action: 'update', userId: alice, teamId: 1, collectionId: 1, recordIds: ['x'] })
          },
      )
    }
    await listReadable(env.store, 'activity_logs') // PostgreSQL: dated by the lists' pass
    const rows = queryAll(env.store, 'SELECT id, created_at AS "createdAt" FROM activity_logs WHERE environment_id = ?', production.id) as { id: number; createdAt: number }[]
    await checkEveryBoundary(rows, (query, limit) => runNow(env.store, listActivityLogIds(acme, production.id, { extensions: true }, parseDateFilters(query, ACTIVITY_DATE_FIELDS), limit)))
    expect(rows.length).toBeGreaterThan(40)
  }, EXHAUSTIVE_MS)
})

/**
 * Times never run ahead of the clock. A burst far above 1,000 entries/s in one environment,
 * through the real write path and the real clock; then the API's own paging recipe (`createdAt.lt` = the last
 * item's `createdAt`, as rendered) over the whole list.
 */
describe('a burst in one environment (real clock)', () => {
  const burst = testEnv({ TRELLIS_API_RATE_PER_MIN: '100000', TRELLIS_API_RATE_PER_HOUR: '100000', TRELLIS_API_RATE_PER_DAY: '100000' })
  afterAll(() => burst.cleanup())
  const app = testApp(burst, { clock: systemClock })
  let token: string
  let environmentId: number
  let author: number
  beforeAll(async () => {
    const document = acmeDocument()
    acmeProject(document).environments!.push('burst') // an environment of its own: nothing else writes there
    await applyAcme({ store: burst.store, clock: systemClock, secret: burst.secret, baseUrl: 'http://trellis.test' }, document)
    token = (await writeNow(burst.store, function* () {
      return yield* createToken(systemClock, { name: 'burst', userId: userId(burst.store, 'alice'), projectId: projectId(burst.store, 'Acme'), scopes: ['all'], expiresAt: null, createdWithSso: false, actorId: null, maxLiveTokens: DEFAULT_LIVE_TOKENS_PER_USER })
    })).value
    environmentId = queryOne<{ id: number }>(burst.store, "SELECT id FROM environments WHERE name = 'burst'")!.id
    author = userId(burst.store, 'alice')
  })

  /** Wall-clock bounds (µs) of each write: an entry's createdAt must lie within them, give or take 1 s ahead. */
  interface Written { id: number; before: number; after: number }

  function check(rows: { id: number; createdAt: number }[], written: Written[], label: string) {
    const byId = new Map(written.map((w) => [w.id, w]))
    let maxAhead = -Infinity
    let sharedMillisecond = 0
    for (const [i, row] of rows.entries()) {
      const w = byId.get(row.id)!
      expect(row.createdAt).toBeGreaterThanOrEqual(w.before)
      maxAhead = Math.max(maxAhead, row.createdAt - w.after)
      if (i > 0) {
        expect(row.createdAt).toBeGreaterThan(rows[i - 1]!.createdAt) // strictly increasing in id order
        if (Math.floor(row.createdAt / 1000) === Math.floor(rows[i - 1]!.createdAt / 1000)) sharedMillisecond++
      }
    }
    expect(maxAhead).toBeLessThanOrEqual(1_000_000) // never more than 1 s ahead of the wall clock
    const ahead = Math.max(...rows.map((r) => r.createdAt)) - Date.now() * 1000
    expect(ahead).toBeLessThanOrEqual(1_000_000)
    console.log(`${label}: ${rows.length} entries, ${sharedMillisecond} shared a millisecond with the one before; ` +
      `max lead over the wall clock at its commit ${maxAhead} µs; newest vs the clock at the end ${ahead} µs`)
    return sharedMillisecond
  }

  /** Walks a list with `createdAt.lt` set to each page's last item, as a client does; every id seen, in order. */
  async function walk(path: string, extra: Record<string, string> = {}) {
    const seen: string[] = []
    let query: Record<string, string> = { limit: '100', ...extra }
    let pages = 0
    for (;;) {
      const response = await app.handle(new Request(`http://trellis.test${path}?${new URLSearchParams(query)}`, { headers: bearer(token) }))
      expect(response.status).toBe(200)
      const body = (await response.json()) as { hasMore: boolean; data: { id: string | number; createdAt: string }[] }
      pages++
      for (const item of body.data) expect(item.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
      seen.push(...body.data.map((item) => String(item.id)))
      if (!body.hasMore) return { seen, pages }
      query = { ...query, 'createdAt.lt': body.data.at(-1)!.createdAt }
    }
  }

  // On SQLite the burst's point is its rate (below). On PostgreSQL, a few round trips an append (about 4,000/s alone,
  // a few hundred a second beside the rest of the suite), 5,000 entries (50 pages) check the same order and paging.
  const ENTRIES = TEST_STORE === 'sqlite' ? 20_000 : 5_000
  test(`${ENTRIES.toLocaleString('en-US')} activity entries: every createdAt within 1 s of the wall clock, strictly increasing, and paging returns each exactly once`, async () => {
    const PER_COMMIT = 100
    const written: Written[] = []
    const started = performance.now()
    for (let done = 0; done < ENTRIES; done += PER_COMMIT) {
      const before = Date.now() * 1000
      await writeNow(burst.store, function* () {
        for (let i = 0; i < PER_COMMIT; i++) {
          yield* appendActivityLogNow(systemClock, { environmentId, type: 'write', action: 'update', userId: author, teamId: 1, collectionId: 1, recordIds: [`r${done + i}`] })
        }
      })
      const after = Date.now() * 1000
      const ids = queryAll<{ id: number }>(burst.store, 'SELECT id FROM activity_logs WHERE environment_id = ? AND id > ? ORDER BY id', environmentId, written.at(-1)?.id ?? 0)
      for (const { id } of ids) written.push({ id: Number(id), before, after })
    }
    const seconds = (performance.now() - started) / 1000
    // On SQLite the burst is far above the 1,000/s a +1 ms step per entry allows: that rule would end ENTRIES ms
    // after the start, many seconds ahead of the clock. That rate — and so most entries sharing a millisecond — is
    // SQLite's promise only (one writer in the process, no round trip per statement): on PostgreSQL each append is a
    // few round trips (300–600/s here), so these two rate checks are SQLite's; every other check runs on both (the
    // stopped-clock test above covers entries sharing a millisecond on PostgreSQL).
    const rateIsSqlites = TEST_STORE === 'sqlite'
    if (rateIsSqlites) expect(ENTRIES / seconds).toBeGreaterThan(2_000)
    console.log(`burst: ${ENTRIES} activity entries in ${seconds.toFixed(2)} s (${Math.round(ENTRIES / seconds)}/s); the +1 ms rule would have ended ${((ENTRIES - seconds * 1000) / 1000).toFixed(1)} s ahead`)
    await listReadable(burst.store, 'activity_logs') // PostgreSQL: dated by the lists' pass
    const rows = queryAll(burst.store, 'SELECT id, created_at AS "createdAt" FROM activity_logs WHERE environment_id = ? ORDER BY id', environmentId) as { id: number; createdAt: number }[]
    expect(rows.length).toBe(ENTRIES) // nothing else writes to this environment's activity log
    const sharedMillisecond = check(rows, written, 'activity burst')
    if (rateIsSqlites) expect(sharedMillisecond).toBeGreaterThan(ENTRIES / 2) // most entries shared a millisecond
    const { seen, pages } = await walk('/v1/project/Acme/environment/burst/activity-logs', { extensions: 'true' })
    expect(seen).toEqual(rows.map((r) => String(r.id)).reverse()) // each exactly once, newest first
    expect(new Set(seen).size).toBe(ENTRIES)
    console.log(`activity paging: ${pages} pages of 100, ${seen.length} entries, ${new Set(seen).size} distinct`)
  }, 120_000)

  test('2,000 notes created in a burst page the same way', async () => {
    const NOTES = 2_000
    const written: Written[] = []
    for (let done = 0; done < NOTES; done += 50) {
      const before = Date.now() * 1000
      const ids = await writeNow(burst.store, function* () {
        const ids: number[] = []
        for (let i = 0; i < 50; i++) {
          const note = yield* createNote(systemClock, { environmentId, teamId: 1, collectionId: 1, recordId: `r${done + i}`, title: `n${done + i}`, content: '<p>x</p>' }, { userId: author, tokenId: null })
          ids.push(note.id)
        }
        return ids
      })
      const after = Date.now() * 1000
      for (const id of ids) written.push({ id, before, after })
    }
    const rows = queryAll(burst.store, 'SELECT id, created_at AS "createdAt" FROM notes WHERE environment_id = ? ORDER BY id', environmentId) as { id: number; createdAt: number }[]
    expect(rows.length).toBe(NOTES)
    check(rows, written, 'notes burst')
    const { seen, pages } = await walk('/v1/project/Acme/environment/burst/notes')
    expect(seen).toEqual(rows.map((r) => String(r.id)).reverse())
    console.log(`notes paging: ${pages} pages of 100, ${seen.length} notes, ${new Set(seen).size} distinct`)
  }, 60_000)
})
