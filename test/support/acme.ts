/**
 * The Acme fixture (examples/acme.yaml) for the webhook and executor tests: the parsed document (to extend
 * before applying), applying it to a store, ids by name, tokens, and webhook paths.
 */
import { DEFAULT_LIVE_TOKENS_PER_USER } from '../../src/config.ts'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { migrate } from '../../src/db/sqlite/migrate.ts'
import { openStore, type SqliteStore } from '../../src/db/sqlite/store.ts'
import type { NewRun } from '../../src/db/queue.ts'
import { insertTask, type NewTask } from '../../src/db/tasks.ts'
import { writeNow } from '../../src/db/write.ts'
import { type Clock, systemClock } from '../../src/lib/clock.ts'
import { loadInstanceSecret } from '../../src/lib/secret.ts'
import { type ApplyReport, parseApplyText } from '../../src/modules/apply/service.ts'
import { createToken, type Scope, type TokenRow } from '../../src/modules/tokens/service.ts'
import { applyNow, queryOne, repoRoot, request, runNow, tempDir, type TestStore } from '../helpers.ts'

export interface AcmeUser {
  email: string
  username: string
  password?: string
}
export interface AcmeProject {
  name: string
  environments?: string[]
  teams?: { name: string; members?: string[] }[]
  members?: { user: string; role: string }[]
  collections?: { name: string; permissions?: Record<string, { read?: boolean; edit?: boolean }>; schema?: { fields: unknown[] } }[]
  records?: { environment: string; collection: string; id: string; data: Record<string, unknown>; team?: string }[]
  workflows?: Record<string, unknown>[]
  notes?: unknown[]
  [key: string]: unknown
}
export interface AcmeDocument {
  users: AcmeUser[]
  projects: AcmeProject[]
}

/**
 * examples/acme.yaml, parsed. Without `passwords` the users get none (hashing four passwords costs ~1 s and
 * only a console login needs one).
 */
export function acmeDocument(options: { passwords?: boolean } = {}): AcmeDocument {
  const document = parseApplyText(readFileSync(join(repoRoot, 'examples/acme.yaml'), 'utf8')) as AcmeDocument
  if (!options.passwords) for (const user of document.users) delete user.password
  return document
}

/** Acme (examples/acme.yaml) plus Globex, where alice and bob are admins (bob is an editor in Acme). */
export function acmeWithGlobex(): AcmeDocument {
  const document = acmeDocument()
  document.projects.push({
    name: 'Globex',
    environments: ['production'],
    teams: [{ name: 'Ops', members: ['bob@example.com'] }],
    members: [
      { user: 'alice@example.com', role: 'admin' },
      { user: 'bob@example.com', role: 'admin' },
    ],
  })
  return document
}

export function acmeProject(document: AcmeDocument): AcmeProject {
  return document.projects.find((p) => p.name === 'Acme')!
}

export function acmeWorkflow(document: AcmeDocument, name: string): Record<string, unknown> & { steps: Record<string, unknown>[] } {
  return acmeProject(document).workflows!.find((w) => w.name === name) as Record<string, unknown> & { steps: Record<string, unknown>[] }
}

export async function applyAcme(ctx: { store: TestStore; clock: Clock; secret: Buffer; baseUrl: string }, document: AcmeDocument): Promise<ApplyReport> {
  return await applyNow(document, ctx)
}

/**
 * For a real `trellis serve`: a fresh data directory with Acme (plus `workflows` in Acme) applied, a working
 * directory beside it, and what `seed` makes on the store (tokens…) before it is closed; the apply writes at
 * `options.clock` (default: the system clock). Both directories are
 * removed by the cleanup handed to `cleanups`.
 */
export async function seedDataDir<T>(
  name: string,
  workflows: Record<string, unknown>[],
  cleanups: (() => void)[],
  seed: (store: SqliteStore, report: ApplyReport) => T | Promise<T>,
  options: { clock?: Clock } = {},
): Promise<{ dataDir: string; cwd: string } & T> {
  const data = tempDir(`trellis-${name}-data-`)
  const cwd = tempDir(`trellis-${name}-cwd-`)
  cleanups.push(data.cleanup, cwd.cleanup)
  const store = openStore(data.path)
  try {
    migrate(store.sqlite)
    const document = acmeDocument()
    acmeProject(document).workflows!.push(...workflows)
    const report = await applyAcme({ store, clock: options.clock ?? systemClock, secret: loadInstanceSecret(data.path), baseUrl: 'http://127.0.0.1' }, document)
    return { dataDir: data.path, cwd: cwd.path, ...(await seed(store, report)) }
  } finally {
    store.close()
  }
}

export function userId(store: TestStore, username: string): number {
  const row = queryOne<{ id: number }>(store, 'SELECT id FROM users WHERE username = ?', username)
  if (!row) throw new Error(`no user ${username}`)
  return row.id
}

export function projectId(store: TestStore, name: string): number {
  const row = queryOne<{ id: number }>(store, 'SELECT id FROM projects WHERE name = ?', name)
  if (!row) throw new Error(`no project ${name}`)
  return row.id
}

/** A fresh API token of `username` on `project` (default Acme); returns its value and row. */
export async function tokenFor(
  store: TestStore,
  clock: Clock,
  username: string,
  scopes: Scope[],
  options: { project?: string; expiresAt?: number | null; name?: string } = {},
): Promise<{ value: string; token: TokenRow }> {
  return await runNow(store, createToken(clock, {
      name: options.name ?? `${username}-${scopes.join('+')}-${crypto.randomUUID().slice(0, 8)}`,
      userId: userId(store, username),
      projectId: projectId(store, options.project ?? 'Acme'),
      scopes,
      expiresAt: options.expiresAt ?? null,
      createdWithSso: false,
      actorId: null,
      maxLiveTokens: DEFAULT_LIVE_TOKENS_PER_USER,
    }))
}

/** Fresh Acme tokens by the names a test calls them: `{ bob: ['bob', ['workflows:trigger']] }` → `{ bob: 'trl_…' }`. */
export async function tokensFor<K extends string>(store: TestStore, clock: Clock, wanted: Record<K, [username: string, scopes: Scope[]]>): Promise<Record<K, string>> {
  const tokens = {} as Record<K, string>
  for (const [name, [username, scopes]] of Object.entries(wanted) as [K, [string, Scope[]]][]) tokens[name] = (await tokenFor(store, clock, username, scopes)).value
  return tokens
}

/** The webhook URL's path (`/v1/hooks/{payload}.{signature}`): base URLs differ between tests and a real server. */
export function hookPath(url: string | null | undefined): string {
  if (!url) throw new Error('the webhook has no URL (disabled?)')
  return new URL(url).pathname
}

/** The webhook URL of a workflow in an apply report. */
export function reportHook(report: ApplyReport, workflowName: string): string {
  const workflow = report.workflows.find((w) => w.name === workflowName)
  if (!workflow) throw new Error(`workflow ${workflowName} not in the report`)
  return hookPath(workflow.webhook.url)
}

/**
 * A value of each path parameter (both spellings: the API's `:projectName`, the console's `:project`) naming a place
 * of the Acme fixture: Support's `Refund order` on `orders` in production, record `ord_1001`.
 */
export function acmePathParams(team = 'Support'): Record<string, string> {
  return {
    projectName: 'Acme',
    project: 'Acme',
    environmentName: 'production',
    environment: 'production',
    teamName: team,
    team,
    collectionName: 'orders',
    collection: 'orders',
    workflowName: 'Refund order',
    workflow: 'Refund order',
    recordId: 'ord_1001',
    record: 'ord_1001',
    id: '1',
  }
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * A workflow on Support's `orders` in production — where most tests put theirs — with its webhook enabled.
 * `overrides` changes any of that (another team or collection, a webhook rate, no webhook block).
 */
export function ordersWorkflow(name: string, steps: Record<string, unknown>[], overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, environment: 'production', team: 'Support', collection: 'orders', webhook: { enabled: true }, steps, ...overrides }
}

/** A queued run of 'Refund order' as bob by webhook, but for its id, record and time (queue tests insert these). */
export function refundRunBase(store: TestStore): Omit<NewRun, 'id' | 'recordId' | 'createdAt'> {
  return runBaseOf(store, 'Refund order')
}

/** A queued run of the workflow called `name` (one of that name in the store) as `username` by webhook, but for its id, record and time. */
export function runBaseOf(store: TestStore, name: string, username = 'bob'): Omit<NewRun, 'id' | 'recordId' | 'createdAt'> {
  const workflow = queryOne<{ id: number; v: number; e: number }>(
    store,
    'SELECT w.id, w.active_version_id AS v, r.environment_id AS e FROM workflows w JOIN renderings r ON r.id = w.rendering_id WHERE w.name = ?',
    name,
  )
  if (!workflow) throw new Error(`no workflow ${name}`)
  return { workflowId: workflow.id, workflowVersionId: workflow.v, environmentId: workflow.e, userId: userId(store, username), tokenId: null, trigger: 'webhook' }
}

/** 'Refund order' started by hand on `recordId` with a console session's cookie (202 expected); the run's id. */
export async function startRefundWithSession(app: { handle(request: Request): Promise<Response> }, cookie: string, recordId: string): Promise<string> {
  const started = await app.handle(
    request('/v1/project/Acme/environment/production/workflow-runs', {
      method: 'POST',
      headers: { cookie },
      json: { workflowName: 'Refund order', teamName: 'Support', recordId },
    }),
  )
  if (started.status !== 202) throw new Error(`starting Refund order on ${recordId}: ${started.status} ${await started.text()}`)
  return ((await started.json()) as { runId: string }).runId
}

/**
 * An open task on the run, as a task step would open it (assigned to the workflow's team), for tests whose runs no
 * executor takes: its id.
 */
export async function openTaskOnRun(store: TestStore, clock: Clock, runId: string, options: Partial<NewTask> = {}): Promise<string> {
  const run = queryOne<{ workflow_id: number; environment_id: number; user_id: number; record_id: string }>(store, 'SELECT workflow_id, environment_id, user_id, record_id FROM runs WHERE id = ?', runId)
  if (!run) throw new Error(`no run ${runId}`)
  const place = queryOne<{ team_id: number; collection_id: number }>(store, 'SELECT g.team_id, w.collection_id FROM workflows w JOIN renderings g ON g.id = w.rendering_id WHERE w.id = ?', run.workflow_id)!
  const task: NewTask = {
    runId, stepIndex: 0, stepName: 'approve', environmentId: run.environment_id, workflowId: run.workflow_id, teamId: place.team_id, collectionId: place.collection_id,
    recordId: run.record_id, requesterId: run.user_id, title: 'Approve?', approvalsRequired: 1, allowRequester: false, form: null, dueAt: null, remindAt: null,
    onTimeout: 'fail', escalateTo: null, teamIds: [place.team_id], userIds: [], ...options,
  }
  return (await writeNow(store, () => insertTask(task, clock.now()))).id
}
