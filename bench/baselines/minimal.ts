/**
 * Baseline (b): the minimal durable path on the same database file, with prepared statements only — the floor any
 * implementation pays on this machine. Webhook: sha256 of the token + one token SELECT + one run INSERT under the
 * partial unique index (409 names the active run). Lists: sha256 + token SELECT, one indexed page query (names
 * resolved in scalar subqueries) and one query for the page's messages (or record ids), rendered to the same JSON
 * shapes as Trellis. No per-request logging, no rate limiter, no activity entry.
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
    if (!authenticate(request)) return json(401, { error: 'Unauthorized' })
    const [project, environment] = [decodeURIComponent(parts[3]!), decodeURIComponent(parts[5]!)]
    if (parts[6] === 'notes') return json(200, listNotes(project, environment, url.searchParams))
    if (parts[6] === 'activity-logs') return json(200, listActivity(project, environment, url.searchParams))
    return json(404, { error: 'Not Found' })
  },
})
console.log(`listening ${server.port}`)
