/** The HTTP scenarios: each runs against baseline (b) and Trellis with the same requests (DESIGN §6–§8 paths). */
import { type LoadSpec, PathsOnce } from './procs.ts'
import { invoiceKey } from './seed-records.ts'
import type { SeedResult } from './seed.ts'

/** The page the console's inbox shows (src/modules/console/tasks.ts `PER_PAGE`): the inbox scenario asks as many. */
export const INBOX_LIMIT = 50

export interface Scenario {
  id: string
  title: string
  expect: number
  /** The requests of one target; `target` keeps unique record ids apart between targets. */
  requests(target: string): LoadSpec['requests']
  method: 'GET' | 'POST' | 'PATCH'
  /** Who asks, when not the admin token: its headers. */
  headers?: Record<string, string>
}

/** Record ids that get an active run before the scenarios (one per webhook): the 409 scenario posts them again. */
export function busyRecordIds(seed: SeedResult): string[] {
  return seed.webhookPaths.map((_, i) => `busy-${i}`)
}

export function scenarios(seed: SeedResult): Scenario[] {
  const base = `/v1/project/${encodeURIComponent(seed.project)}/environment/production`
  const notes = (query: string) => `${base}/notes?${query}`
  const get = (id: string, title: string, path: string): Scenario => ({
    id,
    title,
    expect: 200,
    method: 'GET',
    requests: () => ({ kind: 'get', paths: [path] }),
  })
  return [
    {
      id: 'webhook-202',
      title: 'webhook trigger → 202 (unique record ids over 100 webhooks)',
      expect: 202,
      method: 'POST',
      requests: (target) => ({ kind: 'unique', paths: seed.webhookPaths, prefix: `bench-${target}` }),
    },
    {
      id: 'webhook-409',
      title: 'webhook on a record with an active run → 409',
      expect: 409,
      method: 'POST',
      requests: () => ({ kind: 'fixed', paths: seed.webhookPaths, recordIds: busyRecordIds(seed) }),
    },
    get('notes-10', 'notes `limit=10`, newest', notes('limit=10')),
    get('notes-100', 'notes `limit=100`', notes('limit=100')),
    get('notes-record', 'notes `recordId=`', notes(`recordId=${encodeURIComponent(seed.sampleRecordId)}`)),
    get(
      'notes-user-team',
      'notes `userEmail=` + `teamName=`',
      notes(`userEmail=${encodeURIComponent(seed.sampleUserEmail)}&teamName=${encodeURIComponent(seed.sampleUserTeam)}`),
    ),
    get('notes-deep', 'notes deep page (`createdAt.lt` half-way back)', notes(`createdAt.lt=${encodeURIComponent(seed.halfwayCreatedAt)}`)),
    get('activity-100', 'activity-logs `limit=100`', `${base}/activity-logs?limit=100`),
    ...taskScenarios(seed, base),
    ...recordScenarios(seed, base),
  ]
}

/** The typed collection's query: one status, the largest amounts first (`RECORDS_QUERY`). */
export const RECORDS_QUERY = 'status.eq=open&sort=-amount&limit=50'

/** A filtered, sorted page of the typed collection and a PATCH of one of its records, with a seed that has one. */
function recordScenarios(seed: SeedResult, base: string): Scenario[] {
  const typed = seed.typedRecords
  if (!typed) return []
  const records = `${base}/collection/${encodeURIComponent(typed.collection)}/records`
  // Each PATCH on a record no request changed yet (the same value again would write nothing), over the whole bench.
  const patches = new PathsOnce(Array.from({ length: typed.count }, (_, i) => `${records}/${invoiceKey(typed.count - 1 - i)}`))
  return [
    {
      id: 'records-filter',
      title: `records: \`${RECORDS_QUERY}\` of ${typed.count.toLocaleString('en-US')}`,
      expect: 200,
      method: 'GET',
      requests: () => ({ kind: 'get', paths: [`${records}?${RECORDS_QUERY}`] }),
    },
    {
      id: 'records-patch',
      title: 'records: PATCH one field → 200 (each a record of its own)',
      expect: 200,
      method: 'PATCH',
      requests: () => ({ kind: 'once', paths: patches.share()[0]!, body: JSON.stringify({ data: { amount: 12.34, paid: true } }), method: 'PATCH' }),
    },
  ]
}

/** The inbox and the decision, with a seed that has tasks: each as the member it concerns. */
function taskScenarios(seed: SeedResult, base: string): Scenario[] {
  const tasks = seed.tasks
  if (!tasks) return []
  // Each decision on a task no request decided yet, over the whole bench (SQLite's runs, then PostgreSQL's copy).
  const decisions = new PathsOnce(tasks.decisionTaskIds.map((id) => `/v1/tasks/${id}/decisions`))
  return [
    {
      id: 'inbox',
      title: `inbox: tasks \`assignee=me&status=open&limit=${INBOX_LIMIT}\``,
      expect: 200,
      method: 'GET',
      headers: { authorization: `Bearer ${tasks.inboxToken}` },
      requests: () => ({ kind: 'get', paths: [`${base}/tasks?assignee=me&status=open&limit=${INBOX_LIMIT}`] }),
    },
    {
      id: 'decision',
      title: 'decision: approve → 200 (each an open task of its own)',
      expect: 200,
      method: 'POST',
      headers: { authorization: `Bearer ${tasks.deciderToken}` },
      requests: () => ({ kind: 'once', paths: decisions.share()[0]!, body: JSON.stringify({ decision: 'approve' }) }),
    },
  ]
}
