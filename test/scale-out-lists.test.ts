/**
 * The lists stay exact with several writers: three real `serve` instances on one PostgreSQL write into one
 * environment at once — notes through the API, and runs through a webhook whose workflow writes a note, each with its
 * activity entries and run events — while pagers walk the notes, the activity log and the runs list by `createdAt.lt`
 * (the spec's paging recipe) and a run-event stream is resumed with `Last-Event-ID` on another instance. Halfway
 * through, one instance is killed (SIGKILL): the others take its runs over once their leases end and keep passing the
 * lists' watermark. Afterwards every walk saw exactly the rows of the range it covered, once each, newest first; ids
 * and times agree in order; the stream saw every event of the environment once, in id order; every list caught up.
 */
import { afterAll, beforeAll, describe, expect } from 'bun:test'
import { SQL } from 'bun'
import type { Micros } from '../src/lib/time.ts'
import { toIsoMicros } from '../src/lib/time.ts'
import { bearer, POSTGRES_ONLY, postgresOnlyTest, type ServeProcess, until } from './helpers.ts'
import { acmeDocument, acmeProject, ordersWorkflow } from './support/acme.ts'
import { type Instances, startInstances } from './support/instances.ts'
import { directUrlOf, freshDatabase } from './support/postgres-cluster.ts'
import { type SseEvent, SseReader } from './support/sse.ts'

const PRODUCTION = '/v1/project/Acme/environment/production'
/**
 * How long the writers write — at least WRITE_MS, and on until each kind has written MIN_WRITES (a loaded machine
 * triggers slowly: each trigger waits for its environment's locks behind the step groups), at most MAX_WRITE_MS —
 * and when one instance is killed.
 */
const WRITE_MS = 6_000
const MIN_WRITES = 30
const MAX_WRITE_MS = 40_000
const KILL_AT_MS = 3_000
/** A walk's pages at most (of `PAGE` rows): each walk covers the newest rows, where the writers are. */
const WALK_PAGES = 6
const PAGE = 25

interface Item {
  id: string
  createdAt: string
}

/** A walk: the rows it saw, newest first (its range: from the first's createdAt down to the last's). */
type Walk = Item[]

describe('three instances writing into one environment while pagers walk its lists', () => {
  let set: Instances | undefined
  let sql: SQL
  let admin: string
  let trigger: string

  beforeAll(async () => {
    const url = await freshDatabase()
    sql = new SQL({ url: directUrlOf(url), max: 2 })
    const document = acmeDocument()
    acmeProject(document).workflows!.push(
      ordersWorkflow('Jot', [{ type: 'note', name: 'jot', title: 'Jotted', content: '<p>{{record.id}}</p>' }], { webhook: { enabled: true, ratePerMinute: 100_000 } }),
    )
    set = await startInstances({ url, document, count: 3 })
    admin = await set.token('alice@example.com', 'pager', 'all')
    trigger = await set.token('bob@example.com', 'erp', 'workflows:trigger')
  }, 90_000)

  afterAll(async () => {
    await set?.close()
    await sql?.close()
  })

  /** One walk of `list` on `instance`: the newest page, then `createdAt.lt` the last item's, up to WALK_PAGES pages. */
  async function walk(instance: ServeProcess, list: string, extra: Record<string, string>): Promise<Walk> {
    const seen: Item[] = []
    let query: Record<string, string> = { limit: String(PAGE), ...extra }
    for (let page = 0; page < WALK_PAGES; page++) {
      const response = await fetch(`${instance.url}${PRODUCTION}/${list}?${new URLSearchParams(query)}`, { headers: bearer(admin) })
      expect(response.status).toBe(200)
      const body = (await response.json()) as { hasMore: boolean; data: { id: string | number; createdAt: string }[] }
      seen.push(...body.data.map((item) => ({ id: String(item.id), createdAt: item.createdAt })))
      if (!body.hasMore || body.data.length === 0) break
      query = { ...query, 'createdAt.lt': body.data.at(-1)!.createdAt }
    }
    return seen
  }

  /** `table`'s rows of the production environment, newest first, as the API renders them. */
  async function rowsOf(table: 'notes' | 'activity_logs' | 'runs', environmentId: number): Promise<Item[]> {
    const rows = (await sql.unsafe(`SELECT id::text AS id, created_at::float8 AS at FROM ${table} WHERE environment_id = $1 ORDER BY created_at DESC`, [environmentId])) as {
      id: string
      at: number
    }[]
    return rows.map((row) => ({ id: row.id, createdAt: toIsoMicros(row.at as Micros) }))
  }

  postgresOnlyTest(
    POSTGRES_ONLY.severalInstances,
    'no row skipped or repeated by any walk or by the resumed stream, ids and times in order, one instance killed halfway; every list caught up',
    async () => {
      const instances = [...set!.instances] as [ServeProcess, ServeProcess, ServeProcess]
      const [first, second, doomed] = instances
      const killed = new Set<ServeProcess>()
      const started = Date.now()
      let sequence = 0
      const written = { notes: 0, triggers: 0 }
      const writing = () => {
        const elapsed = Date.now() - started
        return elapsed < WRITE_MS || (elapsed < MAX_WRITE_MS && Math.min(written.notes, written.triggers) < MIN_WRITES)
      }

      // Writers: on each instance two note loops and two trigger loops (fresh records), until the time is up or it is killed.
      const writer = async (instance: ServeProcess, kind: 'note' | 'trigger') => {
        while (writing() && !killed.has(instance)) {
          const n = sequence++
          try {
            const response =
              kind === 'note'
                ? await fetch(`${instance.url}${PRODUCTION}/notes`, {
                    method: 'POST',
                    headers: { ...bearer(admin), 'content-type': 'application/json' },
                    body: JSON.stringify({ recordId: `note-${n % 13}`, collectionName: 'orders', teamName: 'Support', title: `n${n}`, content: `<p>${n}</p>` }),
                  })
                : await fetch(`${instance.url}${set!.hooks.Jot}`, {
                    method: 'POST',
                    headers: { ...bearer(trigger), 'content-type': 'application/json' },
                    body: JSON.stringify({ record_id: `jot-${n}` }),
                  })
            expect(response.status, await response.text()).toBe(kind === 'note' ? 201 : 202)
            written[kind === 'note' ? 'notes' : 'triggers']++
          } catch (error) {
            if (!killed.has(instance)) throw error
          }
        }
      }

      // Pagers: one per list, each on an instance of its own (moving on when it is killed), walking again and again.
      const walks: Record<string, Walk[]> = { notes: [], 'activity-logs': [], 'workflow-runs': [] }
      const pager = async (list: keyof typeof walks, from: number, extra: Record<string, string> = {}) => {
        for (let turn = from; writing(); turn++) {
          const instance = instances[turn % 3]!
          if (killed.has(instance)) continue
          try {
            walks[list]!.push(await walk(instance, list, extra))
          } catch (error) {
            if (!killed.has(instance)) throw error
          }
        }
      }

      // The stream: on the first instance until the kill, then resumed on the second from its last event's id.
      const events: SseEvent[] = []
      const onFirst = new SseReader(await fetch(`${first.url}${PRODUCTION}/workflow-runs/events`, { headers: bearer(admin) }))
      const streamFirst = (async () => {
        while (Date.now() - started < KILL_AT_MS) {
          try {
            events.push(...(await onFirst.eventsUntil(() => true, KILL_AT_MS)))
          } catch {
            // Nothing within the wait: the loop checks the time.
          }
        }
        await onFirst.close()
      })()

      const killer = (async () => {
        await Bun.sleep(KILL_AT_MS)
        killed.add(doomed)
        await set!.kill(doomed)
      })()

      await Promise.all([
        ...instances.flatMap((instance) => [writer(instance, 'note'), writer(instance, 'note'), writer(instance, 'trigger'), writer(instance, 'trigger')]),
        pager('notes', 0),
        pager('activity-logs', 1, { extensions: 'true' }),
        pager('workflow-runs', 2),
        streamFirst,
        killer,
      ])
      console.log(`written: ${written.notes} notes, ${written.triggers} triggers in ${((Date.now() - started) / 1000).toFixed(1)} s; walks: ${Object.entries(walks).map(([list, w]) => `${list} ${w.length}`).join(', ')}; events before the kill ${events.length}`)
      expect(written.notes).toBeGreaterThanOrEqual(MIN_WRITES)
      expect(written.triggers).toBeGreaterThanOrEqual(MIN_WRITES)
      for (const list of Object.keys(walks)) expect(walks[list]!.length).toBeGreaterThan(3)

      // Every run ends (those of the killed instance once their leases end), then the rows are what they will stay.
      await until('every run to end', async () => Number((await sql`SELECT count(*)::int AS n FROM runs WHERE finished_at IS NULL`)[0].n) === 0 || null, 30_000, 100)
      const [environment] = (await sql`SELECT e.id::int AS id FROM environments e JOIN projects p ON p.id = e.project_id WHERE p.name = 'Acme' AND e.name = 'production'`) as { id: number }[]
      const environmentId = environment!.id

      // The stream, resumed on another instance after the last event it got: the rest of the environment's events.
      const ids = ((await sql`SELECT e.id::text AS id FROM run_events e WHERE e.environment_id = ${environmentId} ORDER BY e.id`) as { id: string }[]).map((row) => row.id)
      const lastSeen = events.at(-1)?.id
      const resumed = new SseReader(await fetch(`${second.url}${PRODUCTION}/workflow-runs/events`, { headers: { ...bearer(admin), ...(lastSeen ? { 'last-event-id': lastSeen } : {}) } }))
      events.push(...(await resumed.eventsUntil((event) => event.id === ids.at(-1), 30_000)))
      await resumed.close()
      expect(events.map((event) => event.id)).toEqual(ids)

      // Each walk: exactly the rows of its range, in order, once each.
      for (const [list, table] of [['notes', 'notes'], ['activity-logs', 'activity_logs'], ['workflow-runs', 'runs']] as const) {
        const rows = await rowsOf(table, environmentId)
        // Times are distinct in a list: createdAt orders it whole.
        expect(new Set(rows.map((row) => row.createdAt)).size).toBe(rows.length)
        for (const seen of walks[list]!) {
          if (seen.length === 0) continue
          const [top, bottom] = [seen[0]!.createdAt, seen.at(-1)!.createdAt]
          const expected = rows.filter((row) => row.createdAt <= top && row.createdAt >= bottom)
          expect({ list, seen: seen.map((item) => item.id) }).toEqual({ list, seen: expected.map((row) => row.id) })
        }
      }
      // Ids and times in the same order (notes and activity entries are numbered; runs' ids are random).
      for (const table of ['notes', 'activity_logs'] as const) {
        const byId = (await sql.unsafe(`SELECT created_at::float8 AS at FROM ${table} WHERE environment_id = $1 ORDER BY id`, [environmentId])) as { at: number }[]
        for (let i = 1; i < byId.length; i++) expect(byId[i]!.at).toBeGreaterThan(byId[i - 1]!.at)
      }

      // Every list caught up: the survivors' passes moved each watermark over every id drawn.
      await until('the lists to catch up', async () => {
        const behind = (await sql`SELECT list FROM list_sequencer WHERE through < coalesce(pg_sequence_last_value(seq), 0)`) as { list: string }[]
        return behind.length === 0 || null
      }, 10_000, 100)
      for (const instance of set!.instances) {
        await until(`${instance.url}: no list lags`, async () => /^trellis_list_lag_seconds\{list="run_events"\} 0$/m.test(await (await fetch(`${instance.url}/metrics`)).text()) || null, 5_000, 100)
      }
    },
    150_000,
  )
})
