/**
 * Streams catching up on a long history (docs/workflows.md "Run events (SSE)"), on the test store: a stream resumed
 * far back reads the environment's past on its own, and whatever its filter — a plain member's own runs, a workflow,
 * a record, those together, one that matches nothing — each of its reads examines SCAN_ROWS events at most, and the
 * reads of every stream share a slice of each turn of the event loop. Through a real `serve` on 500,000 events: 40
 * such streams keep `/healthz` under 100 ms at the 99th percentile, then deliver what they should (and PostgreSQL's
 * plans walk the range by index). Through the app on 6,142 events: every filter's reads together find exactly its
 * events, and its streams deliver them in order, none twice, from the start, from the middle, resumed, then live.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { fillPlaceholders } from 'drizzle-orm/sql'
import { read } from '../src/db/read.ts'
import { postgresDialect } from '../src/db/postgres/dialect.ts'
import type { QueryCall } from '../src/db/op.ts'
import { type EnvironmentEventFilter, EVENT_PAGE, environmentEventsPage, SCAN_ROWS } from '../src/db/run-events.ts'
import { systemClock } from '../src/lib/clock.ts'
import { bearer, execute, POSTGRES_ONLY, postgresOnlyTest, processEnv, queryAll, queryOne, request, runEventsReadable, type ServeProcess, startServe, testApp, type TestEnv, testEnv, type TestStore } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, tokenFor, userId } from './support/acme.ts'
import { HIGH_API_BUDGETS } from './support/api-fixture.ts'
import { watchFigures, watching } from './support/overload.ts'
import { isEvent, type RawStream, rawStream, type SseEvent, SseReader } from './support/sse.ts'

const ENVIRONMENT_EVENTS = '/v1/project/Acme/environment/production/workflow-runs/events'
/** /healthz's 99th percentile while the streams catch up (docs/guarantees.md: no request holds the event loop 100 ms). */
const HEALTHZ_P99_MS = 100

/** Runs of one workflow, user and record, each with `perRun` events (its last `run.succeeded`). */
interface Block {
  runs: number
  perRun: number
  workflowId: number
  userId: number
  recordId: string
}

let seeded = 0

/**
 * A history written straight into the tables, block after block (no executor: half a million events in seconds):
 * finished runs in production and their events, each run's events one after another, ids in the order written.
 */
function seedHistory(store: TestStore, blocks: Block[]): void {
  const environmentId = queryOne<{ id: number }>(store, "SELECT id FROM environments WHERE name = 'production'")!.id
  for (const block of blocks) {
    const prefix = `seed${++seeded}-${crypto.randomUUID().slice(0, 8)}`
    execute(
      store,
      `WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ?)
      INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, "trigger", status, next_step, available_at, attempts, created_at)
      SELECT ? || '-' || k, w.id, w.active_version_id, ?, ?, ?, 'webhook', 'succeeded', 0, 0, 1, k FROM n JOIN workflows w ON w.id = ?`,
      block.runs, prefix, environmentId, block.recordId, block.userId, block.workflowId,
    )
    execute(
      store,
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
      INSERT INTO run_events (run_id, environment_id, workflow_id, record_id, sequence, type, status, step_index, step_name, data, created_at)
      SELECT ? || '-' || (i / ? + 1), ?, ?, ?, i % ? + 1,
        CASE WHEN i % ? = ? THEN 'run.succeeded' ELSE 'step.succeeded' END, CASE WHEN i % ? = ? THEN 'succeeded' ELSE 'running' END,
        i % ?, 'step', NULL, 1700000000000000 + i
      FROM n ORDER BY i`,
      block.runs * block.perRun - 1, prefix, block.perRun, environmentId, block.workflowId, block.recordId, block.perRun,
      block.perRun, block.perRun - 1, block.perRun, block.perRun - 1, block.perRun,
    )
  }
  if (store.kind === 'postgres') execute(store, 'ANALYZE runs, run_events')
}

/** Acme with the workflows these tests' histories are runs of: Quick, Other, and Idle (never run). */
async function historyEnv(settings: Record<string, string> = {}): Promise<TestEnv & { workflows: Record<'quick' | 'other' | 'idle', number> }> {
  const env = testEnv(settings)
  const document = acmeDocument()
  acmeProject(document).workflows!.push(
    ...['Quick', 'Other', 'Idle'].map((name) => ordersWorkflow(name, [{ type: 'update', name: 'touch', set: { seen: 'yes' } }])),
  )
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  const id = (name: string) => queryOne<{ id: number }>(env.store, 'SELECT id FROM workflows WHERE name = ?', name)!.id
  return Object.assign(env, { workflows: { quick: id('Quick'), other: id('Other'), idle: id('Idle') } })
}

// ── Through a real server, on half a million events ─────────────────────────

describe('40 streams catching up on 500,000 events, through a real server', () => {
  let env: Awaited<ReturnType<typeof historyEnv>>
  let server: ServeProcess
  let tokens: { alice: string; bob: string }
  /** bob's events (he is an editor: his stream carries his runs alone), at the end of the history. */
  let bobs: number[]

  beforeAll(async () => {
    env = await historyEnv()
    const [alice, bob] = [userId(env.store, 'alice'), userId(env.store, 'bob')]
    const seeding = performance.now()
    seedHistory(env.store, [
      { runs: 5_000, perRun: 100, workflowId: env.workflows.quick, userId: alice, recordId: 'ord_1001' },
      { runs: 3, perRun: 4, workflowId: env.workflows.quick, userId: bob, recordId: 'ord_1002' },
    ])
    console.log(`seeded 500,012 run events in ${Math.round(performance.now() - seeding)} ms (${env.store.kind})`)
    bobs = queryAll<{ id: number }>(env.store, 'SELECT e.id FROM run_events e JOIN runs r ON r.id = e.run_id WHERE r.user_id = ? ORDER BY e.id', bob).map((r) => Number(r.id))
    tokens = { alice: (await tokenFor(env.store, systemClock, 'alice', ['all'])).value, bob: (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value }
    server = await startServe({ dataDir: env.dataDir, cwd: env.dataDir, env: { ...processEnv(env), ...HIGH_API_BUDGETS, TRELLIS_LOG_LEVEL: 'warn' }, timeoutMs: 30_000 })
  }, 120_000)

  afterAll(async () => {
    await server?.stop()
    env?.cleanup()
  })

  test(`a plain member's streams from Last-Event-ID 0 and streams whose filter matches nothing: /healthz under ${HEALTHZ_P99_MS} ms at p99, then each delivers exactly its events`, async () => {
    const fromStart = { 'last-event-id': '0' }
    const open = (path: string, token: string) => rawStream(server.url, path, token, fromStart)
    const { result: streams, watch } = await watching(server, async () => {
      const opened: { members: RawStream[]; empty: RawStream[] } = {
        members: await Promise.all(Array.from({ length: 20 }, () => open(ENVIRONMENT_EVENTS, tokens.bob))),
        empty: await Promise.all([
          ...Array.from({ length: 10 }, () => open(`${ENVIRONMENT_EVENTS}?recordId=nowhere`, tokens.alice)),
          ...Array.from({ length: 10 }, () => open(`${ENVIRONMENT_EVENTS}?workflowName=Idle&teamName=Support`, tokens.alice)),
        ]),
      }
      // The streams read the history meanwhile: 40 × 500,000 events to examine.
      await Bun.sleep(4_000)
      return opened
    })
    const seen = watchFigures(watch)
    console.log(`40 catching-up streams (${env.store.kind}): ${JSON.stringify(seen)}`)
    expect(watch.healthzFailures).toEqual([])
    expect(seen.healthzAsks).toBeGreaterThan(50)
    expect(seen.healthzP99).toBeLessThan(HEALTHZ_P99_MS)

    // Each of bob's streams delivers his events, in order, once; the others nothing (their heads and `retry:` only).
    const idsOf = (stream: RawStream) => [...stream.text().matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))
    await Promise.all(streams.members.map((stream) => stream.until(`id: ${bobs.at(-1)}\n`, 60_000)))
    for (const stream of streams.members) expect(idsOf(stream)).toEqual(bobs)
    for (const stream of streams.empty) {
      expect(stream.text()).toStartWith('HTTP/1.1 200 OK')
      expect(idsOf(stream)).toEqual([])
    }
    for (const stream of [...streams.members, ...streams.empty]) stream.close()
  }, 120_000)

  postgresOnlyTest(POSTGRES_ONLY.queryPlan, "PostgreSQL's plans of a filtered read walk its range of events by index, whatever the filter (SQLite's: test/query-plans.test.ts)", async () => {
    const store = env.store
    if (store.kind !== 'postgres') throw new Error('PostgreSQL only')
    const environmentId = queryOne<{ id: number }>(store, "SELECT id FROM environments WHERE name = 'production'")!.id
    const after = 200_000
    // Each statement the read runs, as the store builds it, with the values it runs with: EXPLAINed, and the range's run.
    const compiled = (step: IteratorResult<unknown>) => {
      const call = (step.value as { query: QueryCall }).query
      const built = call.build(postgresDialect(store.db)).prepare('explained' as never) as unknown as { queryString: string; params: unknown[] }
      return { text: built.queryString, params: fillPlaceholders(built.params, call.values ?? {}) as never[] }
    }
    const plan = async ({ text, params }: ReturnType<typeof compiled>) =>
      ((await store.sql.unsafe(`EXPLAIN ${text}`, params)) as { 'QUERY PLAN': string }[]).map((row) => row['QUERY PLAN']).join('\n')
    const filters: EnvironmentEventFilter[] = [
      { userId: userId(store, 'bob') },
      { userId: userId(store, 'dave') },
      { recordId: 'nowhere' },
      { workflowIds: [env.workflows.idle] },
      { workflowIds: [env.workflows.quick, env.workflows.idle], recordId: 'ord_1001', userId: userId(store, 'alice') },
    ]
    for (const filter of filters) {
      const read = environmentEventsPage(environmentId, after, filter)
      const range = compiled(read.next())
      const rangePlan = await plan(range)
      const window = (await store.sql.unsafe(range.text, range.params).values()) as unknown[][]
      const filteredPlan = await plan(compiled(read.next(window as never)))
      if (process.env.SHOW_PLANS) console.log(`PLAN ${JSON.stringify(filter)}:\n${rangePlan}\n${filteredPlan}`)
      // The range: the next SCAN_ROWS index entries. The read: the events between its two ends (both in an index
      // condition), never a walk of the table.
      expect(rangePlan).toMatch(/Limit[\s\S]*Index (Only )?Scan using run_events_(env_id_idx|pkey) on run_events/)
      expect(filteredPlan).toMatch(/Cond: \([^\n]*\(id > '?200000'?(::bigint)?\) AND \(id <= /)
      for (const shown of [rangePlan, filteredPlan]) expect(shown).not.toMatch(/Seq Scan on run_events/)
    }
  }, 60_000)
})

// ── Exactly the events each filter matches ─────────────────────────────────

describe('every filter, across pages and scan ranges, from the start or resumed, then live', () => {
  let env: Awaited<ReturnType<typeof historyEnv>>
  let app: ReturnType<typeof testApp>
  let users: Record<'alice' | 'bob' | 'dave', number>
  let tokens: Record<'alice' | 'bob' | 'dave', string>
  let production: number

  /** Runs of 37 events (neither a page's 100 nor a range's 1,000 divides it) in long and short stretches per user, workflow and record. */
  const history = (): Block[] => {
    const { quick, other } = env.workflows
    const block = (runs: number, user: number, workflowId: number, recordId: string): Block => ({ runs, perRun: 37, userId: user, workflowId, recordId })
    return [
      block(10, users.alice, quick, 'ord_1001'),
      block(12, users.bob, quick, 'ord_1002'), // 444 of bob's in a row: full pages within one range
      block(70, users.alice, other, 'ord_1001'), // 2,590 of nobody else's: ranges without a match
      block(1, users.bob, other, 'ord_1003'),
      block(40, users.alice, quick, 'ord_1003'),
      block(3, users.bob, quick, 'ord_1001'),
      block(30, users.alice, other, 'ord_1002'),
    ]
  }

  beforeAll(async () => {
    env = await historyEnv({ ...HIGH_API_BUDGETS, TRELLIS_EVENT_HEARTBEAT_SECONDS: '1' })
    users = { alice: userId(env.store, 'alice'), bob: userId(env.store, 'bob'), dave: userId(env.store, 'dave') }
    production = queryOne<{ id: number }>(env.store, "SELECT id FROM environments WHERE name = 'production'")!.id
    seedHistory(env.store, history())
    tokens = {
      alice: (await tokenFor(env.store, systemClock, 'alice', ['all'])).value,
      bob: (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value,
      dave: (await tokenFor(env.store, systemClock, 'dave', ['notes:read'])).value,
    }
    app = testApp(env, { clock: systemClock })
  }, 60_000)

  afterAll(() => env?.cleanup())

  /** An event of production as stored, with its run's user. */
  type Stored = { id: number; user: number; workflow: number; record: string }
  type Wanted = (event: Stored) => boolean

  /** What each stream asks for, and which events that is. */
  const cases = (): { name: string; token: string; query: string; wanted: Wanted }[] => {
    const { quick, other, idle } = env.workflows
    return [
      { name: 'a plain member (their runs)', token: tokens.bob, query: '', wanted: (e) => e.user === users.bob },
      { name: 'a plain member with no runs', token: tokens.dave, query: '', wanted: (e) => e.user === users.dave },
      { name: 'a workflow', token: tokens.alice, query: 'workflowName=Quick&teamName=Support', wanted: (e) => e.workflow === quick },
      { name: 'a record', token: tokens.alice, query: 'recordId=ord_1002', wanted: (e) => e.record === 'ord_1002' },
      { name: 'a workflow and a record', token: tokens.alice, query: 'workflowName=Other&teamName=Support&recordId=ord_1001', wanted: (e) => e.workflow === other && e.record === 'ord_1001' },
      {
        name: "a plain member's, a workflow and a record",
        token: tokens.bob,
        query: 'workflowName=Quick&teamName=Support&recordId=ord_1001',
        wanted: (e) => e.user === users.bob && e.workflow === quick && e.record === 'ord_1001',
      },
      { name: 'a workflow never run', token: tokens.alice, query: 'workflowName=Idle&teamName=Support', wanted: (e) => e.workflow === idle },
      { name: 'everything (an admin, no filter)', token: tokens.alice, query: '', wanted: () => true },
    ]
  }

  /** Production's events as stored now, in id order. */
  const stored = (): Stored[] =>
    queryAll<Record<keyof Stored, number | string>>(env.store, 'SELECT e.id, r.user_id AS "user", e.workflow_id AS workflow, e.record_id AS record FROM run_events e JOIN runs r ON r.id = e.run_id WHERE e.environment_id = ? ORDER BY e.id', production).map(
      (row) => ({ id: Number(row.id), user: Number(row.user), workflow: Number(row.workflow), record: String(row.record) }),
    )

  /** The ids of `events` after `after` that `wanted` takes, in order. */
  const matching = (events: Stored[], wanted: Wanted, after: number) => events.filter((e) => e.id > after && wanted(e)).map((e) => e.id)

  const open = async (query: string, token: string, lastEventId: number) => {
    const response = await app.handle(request(`${ENVIRONMENT_EVENTS}${query ? `?${query}` : ''}`, { headers: { ...bearer(token), 'last-event-id': String(lastEventId) } }))
    expect(response.status).toBe(200)
    return new SseReader(response)
  }

  /** The next `count` events of a stream (heartbeats skipped). */
  async function nextEvents(reader: SseReader, count: number): Promise<SseEvent[]> {
    const events: SseEvent[] = []
    while (events.length < count) {
      const item = await reader.next(20_000)
      if (item === null) throw new Error(`the stream ended after ${events.length} of ${count} events`)
      if (isEvent(item)) events.push(item)
    }
    return events
  }

  const idsOf = (events: SseEvent[]) => events.map((e) => Number(e.id))

  test('a filtered read examines SCAN_ROWS events at most, passes over those it does not deliver, and the reads together find exactly the matches', async () => {
    const { quick, idle } = env.workflows
    const filters: [EnvironmentEventFilter, Wanted][] = [
      [{ userId: users.bob }, (e) => e.user === users.bob],
      [{ userId: users.dave }, (e) => e.user === users.dave],
      [{ recordId: 'ord_1002' }, (e) => e.record === 'ord_1002'],
      [{ workflowIds: [] }, () => false],
      [{ workflowIds: [quick, idle], userId: users.bob, recordId: 'ord_1001' }, (e) => e.user === users.bob && e.workflow === quick && e.record === 'ord_1001'],
    ]
    const events = stored()
    const everyId = events.map((e) => e.id)
    // Read as the streams read: after what committed is readable (PostgreSQL: the events' watermark).
    await runEventsReadable(env.store)
    for (const [filter, wanted] of filters) {
      const found: number[] = []
      let reads = 0
      for (let after = 0; ; reads++) {
        const page = await read(env.store, environmentEventsPage(production, after, filter))
        const examined = everyId.filter((id) => id > after && id <= page.through).length
        expect(examined).toBeLessThanOrEqual(SCAN_ROWS)
        expect(page.events.length).toBeLessThanOrEqual(EVENT_PAGE)
        expect(page.events.every((event) => event.id > after && event.id <= page.through)).toBe(true)
        found.push(...page.events.map((event) => event.id))
        if (page.atEnd) break
        after = page.through
      }
      expect({ filter, found }).toEqual({ filter, found: matching(events, wanted, 0) })
      expect(reads).toBeGreaterThanOrEqual(6) // 6,142 events: seven ranges at least
    }
  }, 30_000)

  test('each stream delivers exactly its events in order, none twice, from Last-Event-ID 0 or from the middle of a stretch without a match; resumed where it left; then the live ones', async () => {
    const history = stored()
    const middle = history[370 + 444 + 500]!.id // in the 2,590 events of alice's Other on ord_1001
    const streams = cases().flatMap((c) => [0, middle].map((from) => ({ ...c, from })))
    const readers = await Promise.all(streams.map((s) => open(s.query, s.token, s.from)))

    // The history: every match after the stream's start, in id order.
    const newest = history.at(-1)!.id
    for (const [i, s] of streams.entries()) {
      const expected = matching(history, s.wanted, s.from)
      expect({ name: s.name, from: s.from, ids: idsOf(await nextEvents(readers[i]!, expected.length)) }).toEqual({ name: s.name, from: s.from, ids: expected })
    }

    // A member's stream left after 150 of its events (across a page's end) and resumed with Last-Event-ID: the rest, once.
    const bobs = matching(history, (e) => e.user === users.bob, 0)
    const leaving = await open('', tokens.bob, 0)
    const first = idsOf(await nextEvents(leaving, 150))
    await leaving.close()
    const resumed = await open('', tokens.bob, first.at(-1)!)
    expect([...first, ...idsOf(await nextEvents(resumed, bobs.length - 150))]).toEqual(bobs)

    // Live: 1,200 events matching none of the filters but the admin's (more than a stream holds for its client: the
    // admin's stream reads them from the table again), then a few for each; written straight into the table, as
    // another process would, and read by the feed's periodic read.
    const { quick, other, idle } = env.workflows
    seedHistory(env.store, [
      { runs: 1, perRun: 1_200, userId: users.alice, workflowId: other, recordId: 'ord_1003' },
      { runs: 2, perRun: 5, userId: users.bob, workflowId: quick, recordId: 'ord_1001' },
      { runs: 1, perRun: 3, userId: users.alice, workflowId: idle, recordId: 'ord_1002' },
      { runs: 1, perRun: 3, userId: users.dave, workflowId: other, recordId: 'ord_1001' },
    ])
    const all = [...streams, { ...streams[0]!, name: 'resumed' }].map((s, i) => ({ ...s, reader: i < streams.length ? readers[i]! : resumed }))
    const live = stored()
    await Promise.all(
      all.map(async ({ name, from, wanted, reader }) => {
        const expected = matching(live, wanted, newest)
        expect(expected.length).toBeGreaterThan(0)
        expect({ name, from, ids: idsOf(await nextEvents(reader, expected.length)) }).toEqual({ name, from, ids: expected })
        // Nothing more: a heartbeat next.
        expect({ name, next: await reader.next(5_000) }).toEqual({ name, next: { comment: 'heartbeat' } })
        await reader.close()
      }),
    )
  }, 90_000)
})
