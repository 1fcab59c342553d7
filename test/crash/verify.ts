/**
 * The soak's checks: the store against the ledger of acknowledged writes (nothing lost), the traces the fixture's
 * workflows leave (no data step taken twice), and the database's own invariants. SQL written once for both stores
 * (portable, `?` parameters: test/helpers.ts `queryAll`).
 */
import { bearer, queryAll } from '../helpers.ts'
import type { Deployment } from './deployment.ts'
import { RUN_NOTE_TITLE, TRAILS } from './fixture.ts'
import type { Ledger } from './load.ts'

export interface Findings {
  lost: string[]
  doubled: string[]
  /** Invariants broken (the store's, or a sample taken during the load), and answers no request may get. */
  violated: string[]
  runsByStatus: Record<string, number>
}

const ACTIVE = "status IN ('queued', 'running', 'waiting')"

/** (workflow, record) pairs with more than one active run right now: the load samples it; never any. */
export function twoActiveRuns(deployment: Deployment): { workflowId: number; recordId: string; n: number }[] {
  return queryAll(deployment.store, `SELECT workflow_id AS "workflowId", record_id AS "recordId", count(*) AS n FROM runs WHERE ${ACTIVE} GROUP BY workflow_id, record_id HAVING count(*) > 1`)
}

export function activeRuns(deployment: Deployment): number {
  return queryAll<{ n: number }>(deployment.store, `SELECT count(*) AS n FROM runs WHERE ${ACTIVE}`)[0]!.n
}

/** The invariants the database keeps whatever happens (SQLite adds its own integrity check). */
const INVARIANTS: [string, string][] = [
  ['two active runs for one (workflow, record)', `SELECT workflow_id, record_id FROM runs WHERE ${ACTIVE} GROUP BY workflow_id, record_id HAVING count(*) > 1`],
  ['a project without an admin', "SELECT p.id FROM projects p WHERE NOT EXISTS (SELECT 1 FROM project_members m WHERE m.project_id = p.id AND m.role = 'admin')"],
  ['no active instance administrator', 'SELECT 1 AS none WHERE NOT EXISTS (SELECT 1 FROM users WHERE is_instance_admin = TRUE AND disabled_at IS NULL)'],
  ['a step of a run recorded twice', 'SELECT run_id, step_index FROM run_steps GROUP BY run_id, step_index HAVING count(*) > 1'],
  ['a finished run still holding a lease', "SELECT id FROM runs WHERE status NOT IN ('queued', 'running', 'waiting') AND lease_owner IS NOT NULL"],
  ['a team member outside the project', 'SELECT t.user_id FROM team_members t JOIN teams tm ON tm.id = t.team_id WHERE NOT EXISTS (SELECT 1 FROM project_members m WHERE m.project_id = tm.project_id AND m.user_id = t.user_id)'],
]

export async function verify(deployment: Deployment, ledger: Ledger): Promise<Findings> {
  const { store } = deployment
  const findings: Findings = { lost: [], doubled: [], violated: [...ledger.unexpected], runsByStatus: {} }
  const lost = (what: string) => findings.lost.push(what)

  // Runs: every acknowledged one exists and has ended; an acknowledged cancel holds.
  const runs = new Map(queryAll<{ id: string; status: string; error: string | null }>(store, 'SELECT id, status, error FROM runs').map((r) => [r.id, r]))
  for (const run of runs.values()) findings.runsByStatus[run.status] = (findings.runsByStatus[run.status] ?? 0) + 1
  for (const [runId, { workflow, recordId }] of ledger.runs) {
    const row = runs.get(runId)
    if (!row) lost(`run ${runId} (${workflow} on ${recordId}) acknowledged, not in the store`)
    else if (!['succeeded', 'failed', 'cancelled'].includes(row.status)) lost(`run ${runId} still ${row.status}`)
    else if (row.status === 'failed') findings.violated.push(`run ${runId} failed: ${row.error}`)
  }
  for (const runId of ledger.cancelled) {
    const status = runs.get(runId)?.status
    if (status !== 'cancelled') lost(`cancel of run ${runId} acknowledged, the run is ${status ?? 'gone'}`)
  }

  // Data steps: each run's id in its workflow's trail at most once, and once for every run that succeeded.
  const records = queryAll<{ recordId: string; data: string }>(store, "SELECT record_key AS \"recordId\", data FROM records WHERE record_key LIKE 'soak\\_%' ESCAPE '\\'")
  const trails = new Map(records.map((r) => [r.recordId, JSON.parse(r.data) as Record<string, string | undefined>]))
  const seen = new Map<string, number>()
  for (const [recordId, data] of trails) {
    for (const field of Object.values(TRAILS)) {
      for (const id of (data[field] ?? '').split(' ').filter(Boolean)) {
        const key = `${field} ${id}`
        seen.set(key, (seen.get(key) ?? 0) + 1)
        if (seen.get(key) === 2) findings.doubled.push(`run ${id} appended to ${recordId}.${field} twice`)
      }
    }
  }
  for (const [runId, { workflow, recordId }] of ledger.runs) {
    if (runs.get(runId)?.status === 'succeeded' && !seen.has(`${TRAILS[workflow]} ${runId}`)) lost(`run ${runId} succeeded, its update is not in ${recordId}.${TRAILS[workflow]}`)
  }
  const runNotes = queryAll<{ content: string; n: number }>(
    store,
    'SELECT m.content, count(*) AS n FROM notes n JOIN note_messages m ON m.note_id = n.id WHERE n.title = ? GROUP BY m.content',
    RUN_NOTE_TITLE,
  )
  const notedRuns = new Set<string>()
  for (const { content, n } of runNotes) {
    const runId = /run ([0-9a-f-]{36})/.exec(content)?.[1] ?? content
    notedRuns.add(runId)
    if (n > 1) findings.doubled.push(`run ${runId} wrote its note ${n} times`)
  }
  for (const [runId, { workflow }] of ledger.runs) {
    if (workflow === 'Soak note' && runs.get(runId)?.status === 'succeeded' && !notedRuns.has(runId)) lost(`run ${runId} succeeded, its note is missing`)
  }

  // Notes, messages, tokens, revocations, memberships: every acknowledged one is there.
  const notes = new Map(queryAll<{ id: number; title: string }>(store, 'SELECT id, title FROM notes').map((n) => [n.id, n.title]))
  for (const [id, title] of ledger.notes) if (notes.get(id) !== title) lost(`note ${id} "${title}" acknowledged, not in the store`)
  const messages = new Set(queryAll<{ noteId: number; content: string }>(store, 'SELECT note_id AS "noteId", content FROM note_messages').map((m) => `${m.noteId} ${m.content}`))
  for (const { noteId, marker } of ledger.messages) if (!messages.has(`${noteId} <p>${marker}</p>`)) lost(`message ${marker} on note ${noteId} acknowledged, not in the store`)
  const tokens = new Map(queryAll<{ id: number; revokedAt: number | null }>(store, 'SELECT id, revoked_at AS "revokedAt" FROM api_tokens').map((t) => [t.id, t.revokedAt]))
  for (const id of ledger.tokens.keys()) {
    if (!tokens.has(id)) lost(`token ${id} acknowledged, not in the store`)
    else if (ledger.revoked.has(id) && tokens.get(id) === null) lost(`revocation of token ${id} acknowledged, the token is live`)
  }
  const roles = new Map(
    queryAll<{ userId: number; role: string }>(store, "SELECT user_id AS \"userId\", role FROM project_members WHERE project_id = (SELECT id FROM projects WHERE name = 'Acme')").map((m) => [m.userId, m.role]),
  )
  for (const [userId, state] of ledger.members) {
    const role = roles.get(userId) ?? 'none'
    if (!state.possible.has(role)) lost(`user ${userId} is ${role}; the last acknowledged change left ${[...state.possible].join(' or ')}`)
  }

  // Through the API, on every instance (each restarted since): revoked tokens refused, the others let in.
  for (const url of deployment.live()) {
    for (const [id, value] of ledger.tokens) {
      if (ledger.maybeRevoked.has(id) || !tokens.has(id)) continue
      const status = (await fetch(`${url}/v1/project/Acme/environment/production/notes?limit=1`, { headers: bearer(value) })).status
      const want = ledger.revoked.has(id) ? 401 : 200
      // A revoked token let in lost its revocation; a live one refused lost its creation.
      if (status !== want) lost(`token ${id}${want === 401 ? ' (revoked)' : ''} answered ${status} on ${url}, not ${want}`)
    }
  }

  for (const [name, query] of INVARIANTS) {
    const rows = queryAll(store, query)
    if (rows.length > 0) findings.violated.push(`${name}: ${JSON.stringify(rows.slice(0, 5))}`)
  }
  if (store.kind === 'sqlite') {
    const integrity = queryAll<{ integrity_check: string }>(store, 'PRAGMA integrity_check').map((r) => r.integrity_check)
    if (integrity.join() !== 'ok') findings.violated.push(`PRAGMA integrity_check: ${integrity.slice(0, 5).join('; ')}`)
  }
  return findings
}
