/**
 * Baseline (b): the minimal durable path on the same database file, with prepared statements only — the floor any
 * implementation pays on this machine. Webhook: sha256 of the token + one token SELECT + one run INSERT under the
 * partial unique index (409 names the active run). Lists: sha256 + token SELECT, one indexed page query (names
 * resolved in scalar subqueries) and one query for the page's messages (or record ids), rendered to the same JSON
 * shapes as Trellis. The inbox (`tasks?assignee=me`): the obvious join of the tasks with their assignees (the
 * caller or one of their teams), newest first, then the page's assignees and decisions. A decision: in one
 * transaction, the task with the caller's right to decide it, the decision inserted, the approvals counted, the task
 * closed and its run woken. The typed collection's page: one statement over its field expressions, the collection's
 * id literal; its PATCH: the record read, merged and written back in one transaction. No per-request logging, no rate limiter, no activity entry, no run event.
 * Usage: bun bench/baselines/minimal.ts <port> <database file>
 */
import { Database } from 'bun:sqlite'
import { randomUUIDv7 } from 'bun'
import { createHash } from 'node:crypto'
import { type Micros, parseIsoMicros, toIsoMicros } from '../../src/lib/time.ts'

const [port, file] = [Number(process.argv[2] ?? 0), process.argv[3]!]
const db = new Database(file, { strict: true })
for (const pragma of ['busy_timeout = 5000', 'journal_mode = WAL', 'synchronous = NORMAL', 'foreign_keys = ON']) db.run(`PRAGMA ${pragma}`)
const token = db.prepare('SELECT id, user_id FROM api_tokens WHERE token_hash = ? AND revoked_at IS NULL')
const insertRun = db.prepare(`INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
  status, next_step, available_at, attempts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'webhook', 'queued', 0, ?, 0, ?)`)
// The active-run index's predicate as the schema writes it (migration 0014): SQLite uses a partial index only for a
// WHERE that repeats it.
const activeRun = db.prepare("SELECT id FROM runs WHERE workflow_id = ? AND record_id = ? AND (status = 'queued' OR status = 'running' OR status = 'waiting')")
// Static per workflow: the minimal path does not re-read it per request.
const workflows = new Map((db.prepare('SELECT w.id, w.active_version_id AS v, r.environment_id AS e FROM workflows w JOIN renderings r ON r.id = w.rendering_id').all() as { id: number; v: number; e: number }[]).map((w) => [w.id, w]))
const ENV = '(SELECT e.id FROM environments e JOIN projects p ON p.id = e.project_id WHERE p.name = $project AND e.name = $environment)'
const user = (alias: string) => `json_object('object', 'user', 'id', ${alias}.id, 'username', ${alias}.username, 'email', ${alias}.email)`
const page = (where: string) => db.prepare(`SELECT n.id, n.title, n.record_id, n.created_at, n.updated_at, n.archived_at, ${user('u')} AS user, t.name AS team, c.name AS coll
  FROM notes n JOIN users u ON u.id = n.user_id JOIN teams t ON t.id = n.team_id LEFT JOIN collections c ON c.id = n.collection_id
  WHERE n.environment_id = ${ENV} ${where} ORDER BY n.id DESC LIMIT $limit`)
const pages = {
  plain: page(''),
  recordId: page('AND n.record_id = $recordId'),
  // `+` keeps the planner (no ANALYZE statistics) on the user's index rather than the team's, 100× larger.
  userTeam: page(`AND n.user_id = (SELECT id FROM users WHERE email = $userEmail)
    AND +n.team_id = (SELECT t.id FROM teams t JOIN projects p ON p.id = t.project_id WHERE p.name = $project AND t.name = $teamName)`),
  // created_at increases with id (DESIGN §3, true of this database): the bound becomes an id bound, O(log n).
  createdBefore: page(`AND n.id < coalesce((SELECT id FROM notes WHERE environment_id = ${ENV} AND created_at >= $createdBefore
    ORDER BY created_at LIMIT 1), 9223372036854775807)`),
}
const messages = db.prepare(`SELECT m.note_id, m.content, m.created_at, ${user('u')} AS user FROM note_messages m JOIN users u ON u.id = m.user_id
  WHERE m.note_id IN (SELECT value FROM json_each(?)) ORDER BY m.note_id, m.id`)
const logs = db.prepare(`SELECT a.id, a.type, a.action, a.label, a.created_at, a.workflow_name, a.run_id, a.step_name, ${user('u')} AS user, t.name AS team, c.name AS coll
  FROM activity_logs a JOIN users u ON u.id = a.user_id LEFT JOIN teams t ON t.id = a.team_id LEFT JOIN collections c ON c.id = a.collection_id
  WHERE a.environment_id = ${ENV} ORDER BY a.id DESC LIMIT $limit`)
const logRecords = db.prepare('SELECT log_id, record_id FROM activity_log_records WHERE log_id IN (SELECT value FROM json_each(?))')
// The inbox: the environment's open tasks newest first, joined with the assignee rows naming the caller or one of
// their teams (a task naming both appears twice: DISTINCT), not decided by them, not their own request.
const inbox = db.prepare(`SELECT DISTINCT k.id, k.status, k.step_name, k.title, k.run_id, w.name AS workflow, v.version, k.record_id, c.name AS coll,
    tm.name AS team, k.approvals_required, k.form, k.due_at, k.escalated, k.created_at, k.closed_at
  FROM tasks k
    JOIN task_assignees a ON a.task_id = k.id AND (a.user_id = $me OR a.team_id IN (SELECT team_id FROM team_members WHERE user_id = $me))
    JOIN runs r ON r.id = k.run_id JOIN workflow_versions v ON v.id = r.workflow_version_id JOIN workflows w ON w.id = k.workflow_id
    JOIN teams tm ON tm.id = k.team_id LEFT JOIN collections c ON c.id = k.collection_id
  WHERE k.environment_id = ${ENV} AND k.status = 'open' AND (k.allow_requester OR k.requester_id <> $me)
    AND NOT EXISTS (SELECT 1 FROM task_decisions x WHERE x.task_id = k.id AND x.user_id = $me)
  ORDER BY k.created_at DESC LIMIT $limit`)
const assignees = db.prepare(`SELECT a.task_id, tm.name AS team, ${user('u')} AS user FROM task_assignees a LEFT JOIN teams tm ON tm.id = a.team_id LEFT JOIN users u ON u.id = a.user_id
  WHERE a.task_id IN (SELECT value FROM json_each(?))`)
const decisions = db.prepare(`SELECT x.task_id, x.decision, x.comment, x.input, x.created_at, ${user('u')} AS user FROM task_decisions x JOIN users u ON u.id = x.user_id
  WHERE x.task_id IN (SELECT value FROM json_each(?)) ORDER BY x.created_at`)
// A decision: the task if the caller may decide it (named, or one of their teams), then the writes.
const decidable = db.prepare(`SELECT k.status, k.approvals_required, k.requester_id, k.allow_requester, k.run_id FROM tasks k WHERE k.id = ?1
  AND EXISTS (SELECT 1 FROM task_assignees a WHERE a.task_id = k.id AND (a.user_id = ?2 OR a.team_id IN (SELECT team_id FROM team_members WHERE user_id = ?2)))`)
const insertDecision = db.prepare("INSERT INTO task_decisions (task_id, user_id, decision, created_at) VALUES (?, ?, 'approve', ?)")
const approvals = db.prepare("SELECT count(*) AS n FROM task_decisions WHERE task_id = ? AND decision = 'approve'")
const closeTask = db.prepare("UPDATE tasks SET status = 'approved', closed_at = ? WHERE id = ? AND status = 'open'")
const wakeRun = db.prepare("UPDATE runs SET available_at = ? WHERE id = ? AND status = 'waiting'")
// The typed collection's page (bench/scenarios.ts RECORDS_QUERY): one status, the largest amounts first, the
// collection's id written into the statement so that its field indexes (partial on it) can serve.
const typedCollection = db.prepare("SELECT id FROM collections WHERE name = 'invoices'").all()[0] as { id: number } | undefined
const typedPage = typedCollection
  ? db.prepare(`SELECT id, record_key, data, created_at, updated_at FROM records
      WHERE environment_id = ${ENV} AND collection_id = ${typedCollection.id} AND json_extract(data, '$.status') = $status AND deleted_at IS NULL
      ORDER BY json_extract(data, '$.amount') DESC, id DESC LIMIT $limit`)
  : null
// A PATCH: the record read and written back merged, in one transaction (no schema check, no activity entry, no ETag).
const typedRecord = db.prepare(`SELECT id, data, created_at FROM records WHERE environment_id = ${ENV} AND collection_id = $collection AND record_key = $key AND deleted_at IS NULL`)
const writeRecord = db.prepare('UPDATE records SET data = ?, updated_at = ? WHERE id = ?')
// Note and log times are epoch µs (README "Times"), rendered as Trellis renders them.
const iso = (us: number) => toIsoMicros(us as Micros)
const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } })
const authenticate = (request: Request) => token.all(createHash('sha256').update((request.headers.get('authorization') ?? '').slice(7)).digest('hex'))[0] as { id: number; user_id: number } | undefined
type Row = Record<string, number | string | null>

function listNotes(project: string, environment: string, q: URLSearchParams) {
  const limit = Number(q.get('limit') ?? 10)
  const args = { project, environment, limit: limit + 1, recordId: q.get('recordId'), userEmail: q.get('userEmail'), teamName: q.get('teamName'), createdBefore: q.has('createdAt.lt') ? parseIsoMicros(q.get('createdAt.lt')!) : null }
  const statement = args.recordId ? pages.recordId : args.userEmail ? pages.userTeam : args.createdBefore ? pages.createdBefore : pages.plain
  const rows = statement.all(args) as Row[]
  const ids = rows.slice(0, limit).map((r) => r.id)
  const threads = new Map<unknown, unknown[]>()
  for (const m of messages.all(JSON.stringify(ids)) as Row[]) {
    const thread = threads.get(m.note_id) ?? threads.set(m.note_id, []).get(m.note_id)!
    thread.push({ object: 'note-message', content: m.content, createdAt: iso(m.created_at as number), user: JSON.parse(m.user as string) })
  }
  const data = rows.slice(0, limit).map((n) => ({
    object: 'note', id: n.id, title: n.title, recordId: n.record_id, createdAt: iso(n.created_at as number), updatedAt: iso(n.updated_at as number),
    ...(n.archived_at !== null ? { archivedAt: iso(n.archived_at as number) } : {}), user: JSON.parse(n.user as string),
    environment: { object: 'environment', name: environment }, team: { object: 'team', name: n.team },
    ...(n.coll !== null ? { collection: { object: 'collection', name: n.coll } } : {}), messages: threads.get(n.id) ?? [],
  }))
  return { hasMore: rows.length > limit, data, parameters: { projectName: project, environmentName: environment, limit } }
}

function listActivity(project: string, environment: string, q: URLSearchParams) {
  const limit = Number(q.get('limit') ?? 10)
  const rows = logs.all({ project, environment, limit: limit + 1 }) as Row[]
  const ids = rows.slice(0, limit).map((r) => r.id)
  const records = new Map<unknown, string[]>()
  for (const r of logRecords.all(JSON.stringify(ids)) as Row[]) (records.get(r.log_id) ?? records.set(r.log_id, []).get(r.log_id)!).push(r.record_id as string)
  const data = rows.slice(0, limit).map((a) => ({
    object: 'activityLog', id: String(a.id), type: a.type, action: a.action, ...(a.label !== null ? { label: a.label } : {}), recordIds: records.get(a.id) ?? [],
    createdAt: iso(a.created_at as number), user: JSON.parse(a.user as string), environment: { object: 'environment', name: environment },
    team: { object: 'team', name: a.team }, ...(a.coll !== null ? { collection: { object: 'collection', name: a.coll } } : {}),
    ...(a.workflow_name !== null ? { workflow: { object: 'workflow', name: a.workflow_name, runId: a.run_id, ...(a.step_name !== null ? { stepName: a.step_name } : {}) } } : {}),
  }))
  return { hasMore: rows.length > limit, data, parameters: { projectName: project, environmentName: environment, limit } }
}

function listInbox(project: string, environment: string, me: number, q: URLSearchParams) {
  const limit = Number(q.get('limit') ?? 10)
  const rows = inbox.all({ project, environment, me, limit: limit + 1 }) as Row[]
  const ids = JSON.stringify(rows.slice(0, limit).map((r) => r.id))
  const named = new Map<unknown, { teams: unknown[]; users: unknown[] }>()
  for (const a of assignees.all(ids) as Row[]) {
    const entry = named.get(a.task_id) ?? named.set(a.task_id, { teams: [], users: [] }).get(a.task_id)!
    if (a.team !== null) entry.teams.push(a.team)
    else entry.users.push(JSON.parse(a.user as string))
  }
  const decided = new Map<unknown, unknown[]>()
  for (const x of decisions.all(ids) as Row[]) {
    ;(decided.get(x.task_id) ?? decided.set(x.task_id, []).get(x.task_id)!).push({
      user: JSON.parse(x.user as string), decision: x.decision, comment: x.comment, input: x.input === null ? null : JSON.parse(x.input as string), createdAt: iso(x.created_at as number),
    })
  }
  const data = rows.slice(0, limit).map((k) => ({
    object: 'task', id: k.id, status: k.status, step: k.step_name, title: k.title, run: { id: k.run_id, workflow: { name: k.workflow, version: k.version } }, recordId: k.record_id,
    collection: k.coll === null ? null : { object: 'collection', name: k.coll }, environment: { object: 'environment', name: environment }, team: { object: 'team', name: k.team },
    assignees: named.get(k.id) ?? { teams: [], users: [] }, approvalsRequired: k.approvals_required,
    approvals: (decided.get(k.id) ?? []).filter((x) => (x as { decision: string }).decision === 'approve').length, decisions: decided.get(k.id) ?? [],
    form: k.form === null ? null : JSON.parse(k.form as string), dueAt: k.due_at === null ? null : new Date(k.due_at as number).toISOString(), escalated: k.escalated === 1,
    createdAt: iso(k.created_at as number), closedAt: k.closed_at === null ? null : new Date(k.closed_at as number).toISOString(),
  }))
  return { hasMore: rows.length > limit, data, parameters: { projectName: project, environmentName: environment, limit } }
}

function listTypedRecords(project: string, environment: string, collection: string, q: URLSearchParams) {
  const limit = Number(q.get('limit') ?? 10)
  const rows = typedPage!.all({ project, environment, status: q.get('status.eq'), limit: limit + 1 }) as Row[]
  const data = rows.slice(0, limit).map((r) => ({
    id: r.record_key, data: JSON.parse(r.data as string), createdAt: new Date(r.created_at as number).toISOString(), updatedAt: new Date(r.updated_at as number).toISOString(),
  }))
  const last = rows.length > limit ? rows[limit - 1]! : undefined
  return {
    hasMore: last !== undefined, data, parameters: { projectName: project, environmentName: environment, limit, collectionName: collection, sort: q.get('sort') },
    ...(last ? { nextCursor: Buffer.from(JSON.stringify([q.get('sort'), (JSON.parse(last.data as string) as { amount: number }).amount, last.id])).toString('base64url') } : {}),
  }
}

const patchRecord = db
  .transaction((project: string, environment: string, key: string, changes: Record<string, unknown>) => {
    const row = typedRecord.all({ project, environment, collection: typedCollection?.id ?? 0, key })[0] as Row | undefined
    if (!row) return json(404, { error: 'Not Found' })
    const data = { ...(JSON.parse(row.data as string) as Record<string, unknown>), ...changes }
    const now = Date.now()
    writeRecord.run(JSON.stringify(data), now, row.id as number)
    return json(200, { id: key, data, createdAt: new Date(row.created_at as number).toISOString(), updatedAt: new Date(now).toISOString() })
  })
  .immediate

/** Approve: 404 unless the caller may decide the task, 409 when it is closed or they decided it already. */
const approve = db
  .transaction((taskId: string, me: number) => {
    const task = decidable.all(taskId, me)[0] as Row | undefined
    if (!task) return json(404, { error: 'Not Found' })
    if (task.status !== 'open' || (task.requester_id === me && task.allow_requester === 0)) return json(409, { error: 'Conflict', status: task.status })
    const now = Date.now()
    try {
      insertDecision.run(taskId, me, now * 1000)
    } catch (error) {
      if ((error as { code?: string }).code !== 'SQLITE_CONSTRAINT_PRIMARYKEY') throw error
      return json(409, { error: 'Conflict', code: 'already_decided' })
    }
    const count = (approvals.all(taskId)[0] as { n: number }).n
    const closed = count >= (task.approvals_required as number)
    if (closed) {
      closeTask.run(now, taskId)
      wakeRun.run(now, task.run_id as string)
    }
    return json(200, { object: 'task', id: taskId, status: closed ? 'approved' : 'open', approvalsRequired: task.approvals_required, approvals: count })
  })
  .immediate

async function decide(request: Request, taskId: string, me: number) {
  if (((await request.json()) as { decision?: string }).decision !== 'approve') return json(400, { error: 'Bad Request' })
  return approve(taskId, me)
}

async function trigger(request: Request, hook: string) {
  const workflow = workflows.get(JSON.parse(Buffer.from(hook.split('.')[0]!, 'base64url').toString()).w)
  const caller = authenticate(request)
  if (!workflow || !caller) return json(401, { error: 'Unauthorized' })
  const recordId = ((await request.json()) as { record_id: string }).record_id
  const id = randomUUIDv7()
  const now = Date.now()
  try {
    insertRun.run(id, workflow.id, workflow.v, workflow.e, recordId, caller.user_id, caller.id, now, now * 1000)
  } catch (error) {
    if ((error as { code?: string }).code !== 'SQLITE_CONSTRAINT_UNIQUE') throw error
    return json(409, { error: 'Conflict', code: 'run_in_progress', runId: (activeRun.all(workflow.id, recordId)[0] as { id: string } | undefined)?.id ?? null })
  }
  return json(202, { runId: id })
}

const server = Bun.serve({
  hostname: '127.0.0.1',
  port,
  fetch(request) {
    const url = new URL(request.url)
    const parts = url.pathname.split('/')
    if (parts[1] === 'healthz') return json(200, { status: 'ok' })
    if (parts[2] === 'hooks' && request.method === 'POST') return trigger(request, parts[3]!)
    const caller = authenticate(request)
    if (!caller) return json(401, { error: 'Unauthorized' })
    if (parts[2] === 'tasks' && parts[4] === 'decisions' && request.method === 'POST') return decide(request, parts[3]!, caller.user_id)
    const [project, environment] = [decodeURIComponent(parts[3]!), decodeURIComponent(parts[5]!)]
    if (parts[6] === 'notes') return json(200, listNotes(project, environment, url.searchParams))
    if (parts[6] === 'activity-logs') return json(200, listActivity(project, environment, url.searchParams))
    if (parts[6] === 'tasks') return json(200, listInbox(project, environment, caller.user_id, url.searchParams))
    if (parts[6] === 'collection' && parts[8] === 'records' && request.method === 'PATCH') {
      return request.json().then((body) => patchRecord(project, environment, decodeURIComponent(parts[9]!), (body as { data: Record<string, unknown> }).data))
    }
    if (parts[6] === 'collection' && parts[8] === 'records' && typedPage) return json(200, listTypedRecords(project, environment, decodeURIComponent(parts[7]!), url.searchParams))
    return json(404, { error: 'Not Found' })
  },
})
console.log(`listening ${server.port}`)
