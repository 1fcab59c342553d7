/**
 * Seeds a benchmark database in `dataDir` through the real migrations.
 * - Structure (users, project, environments, teams, members, collections, records, 100 workflows with their
 *   webhook enabled) goes through `applyDocument`, the code path of `trellis apply`, so every row the app
 *   expects (renderings, workflow_versions, webhook_triggers, admin log entries) is there.
 * - Notes, their messages and one `createNote` activity entry per note go straight into the schema with
 *   prepared statements in batched transactions, keeping the app's invariants: note ids AUTOINCREMENT,
 *   `created_at` strictly increasing in id order, `updated_at` = newest message (or the archive time),
 *   message HTML already in its sanitised form, activity `created_at` never going back in id order. Times are
 *   computed in ms and stored in µs, the unit of note and log times (docs/design-decisions.md "Times").
 * - With `tasks`, approval tasks too (./seed-tasks.ts): their workflows (a task step, then an update), the approvers'
 *   teams and the inbox user's and the decider's tokens through the same paths, the rows straight into the schema.
 * - With `typedRecords`, a typed collection (./seed-records.ts): its schema through `apply`, its records straight in.
 * - Admin tokens come from `createToken`.
 */
import { DEFAULT_LIVE_TOKENS_PER_USER } from '../src/config.ts'
import { loadInstanceSecret } from '../src/lib/secret.ts'
import { migrate } from '../src/db/sqlite/migrate.ts'
import { openStore } from '../src/db/sqlite/store.ts'
import { sanitizeNoteHtml } from '../src/lib/html.ts'
import { systemClock } from '../src/lib/clock.ts'
import { microsFromMillis } from '../src/lib/time.ts'
import { applyDocumentNow } from '../src/modules/apply/service.ts'
import { createToken } from '../src/modules/tokens/service.ts'
import { type ApprovalWorkflow, seedTasks, type TaskSeedResult, type TaskSeedSizes } from './seed-tasks.ts'
import { seedTypedRecords, TYPED_COLLECTION, TYPED_SCHEMA } from './seed-records.ts'

export interface SeedSizes {
  notes: number
  records: number
  users: number
  workflows: number
  /** Approval tasks (bench/seed-tasks.ts); none when absent. */
  tasks?: TaskSeedSizes
  /** Records of the typed collection (bench/seed-records.ts); none when absent. */
  typedRecords?: number
}

/** The typed collection seeded (bench/seed-records.ts). */
export interface SeededRecords {
  collection: string
  count: number
  seconds: number
}

/** The tasks seeded, and who the task scenarios act as. */
export interface SeededTasks extends TaskSeedResult {
  /** A member (not an admin) with `inbox` open tasks to decide: the inbox scenario's caller. */
  inboxUserEmail: string
  inboxToken: string
  /** A member the decision scenario's tasks are assigned to. */
  deciderEmail: string
  deciderToken: string
  seconds: number
}

export interface SeedResult {
  dataDir: string
  dbPath: string
  project: string
  environments: string[]
  teams: string[]
  collections: string[]
  /** `/v1/hooks/<payload>.<signature>` of each workflow, in workflow order. */
  webhookPaths: string[]
  workflowIds: number[]
  /** The workflows' collection names, in workflow order (records of that collection exist in production). */
  workflowCollections: string[]
  /** Record keys per collection in production. */
  productionRecords: Record<string, string[]>
  /** An admin token with scope `all` (notes, logs, webhooks). */
  adminToken: string
  adminEmail: string
  /** A user with notes, and their team (the userEmail + teamName scenario). */
  sampleUserEmail: string
  sampleUserTeam: string
  /** A record of production with notes (the recordId scenario). */
  sampleRecordId: string
  /** The created_at (ISO) of the production note half-way back (the deep page). */
  halfwayCreatedAt: string
  notes: number
  messages: number
  activityEntries: number
  timings: { structureMs: number; notesMs: number; totalMs: number }
  /** Notes (with messages and activity entries) per second. */
  notesPerSecond: number
  rowsPerSecond: number
  tasks: SeededTasks | null
  typedRecords: SeededRecords | null
}

export const PROJECT = 'Bench'
export const ENVIRONMENTS = ['production', 'staging']
export const TEAMS = ['Support', 'Billing', 'Logistics']
export const COLLECTIONS = ['orders', 'customers']
/** With tasks: the approvers' teams (user `i` > 0 in team `i % 20`) and the approval workflows per environment. */
const APPROVER_TEAMS = Array.from({ length: 20 }, (_, i) => `Approvers-${String(i).padStart(2, '0')}`)
const APPROVAL_WORKFLOWS = { production: 80, staging: 2 }
const INBOX_USER_INDEX = 5
const DECIDER_INDEX = 6
const BATCH = 10_000

/** Deterministic PRNG (mulberry32): the same database on every run. */
/**
 * The record run `i` of a drain's burst goes to (its workflow: `i % workflows`), among `records` of the workflow's
 * collection: the k-th run of each workflow (k = i ÷ workflows) on a record of its own, and the runs queued next to
 * each other — those the executor's workers take at once — on different records (53 records apart), as a burst of
 * triggers for many records would be; a burst where every workflow started on the same record at once would measure
 * that record's row lock (each step group updates the record). Each workflow gets each record at most once while
 * `i ÷ workflows` stays below `records`.
 */
export function burstRecord<T>(records: readonly T[], i: number, workflows: number): T {
  return records[(Math.floor(i / workflows) + 53 * (i % workflows)) % records.length]!
}

export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const WORDS = (
  'customer order refund delivery parcel invoice address payment card shipment warehouse carrier tracking ' +
  'damaged missing late early replacement discount coupon subscription renewal cancel confirmed pending ' +
  'escalated resolved callback email phone chat agent supervisor policy exception approved declined ' +
  'balance credit debit account profile password reset verified identity return label pickup courier ' +
  'weekend monday tuesday urgent priority standard express international customs duty fee'
).split(' ')
const NAMES = ['Alice Martin', 'Bob Chen', 'Chloé Durand', 'Dmitri Ivanov', 'Emma Wilson', 'Farid Haddad', 'Grace Okafor', 'Hiro Tanaka']
const TITLES = [
  'Refund request', 'Delivery delayed', 'Address change', 'Damaged parcel', 'Duplicate charge', 'Subscription renewal',
  'Missing item', 'Return label', 'Invoice correction', 'Account locked', 'Carrier complaint', 'VIP follow-up',
]

function sentence(rand: () => number, min = 6, max = 16): string {
  const n = min + Math.floor(rand() * (max - min + 1))
  const words: string[] = []
  for (let i = 0; i < n; i++) words.push(WORDS[Math.floor(rand() * WORDS.length)]!)
  const text = words.join(' ')
  return `${text[0]!.toUpperCase()}${text.slice(1)}.`
}

/** A pool of realistic message bodies, already in the form the sanitiser stores (checked below). */
function messagePool(rand: () => number, size: number): string[] {
  const pick = <T>(list: readonly T[]) => list[Math.floor(rand() * list.length)]!
  const templates: (() => string)[] = [
    () => `<p>${sentence(rand)}</p>`,
    () => {
      const n = 100_000 + Math.floor(rand() * 900_000)
      return `<p>Customer <strong>${pick(NAMES)}</strong> called about order <a href="https://shop.example.com/orders/${n}">#${n}</a>. ${sentence(rand)}</p>`
    },
    () => `<p>${sentence(rand)}</p><ul><li>${sentence(rand, 3, 8)}</li><li>${sentence(rand, 3, 8)}</li></ul>`,
    () => `<p>${sentence(rand)} <em>${sentence(rand, 2, 5)}</em></p><p>${sentence(rand)}</p>`,
    () => `<blockquote>${sentence(rand)}</blockquote><p>${sentence(rand, 4, 10)}</p>`,
    () => `<p>Tracking <code>1Z${Math.floor(rand() * 1e12).toString(36).toUpperCase()}</code>: ${sentence(rand)}</p>`,
    () => `<p>Refund of <strong>${(rand() * 500).toFixed(2)} EUR</strong> approved.</p><ol><li>${sentence(rand, 3, 8)}</li><li>${sentence(rand, 3, 8)}</li><li>${sentence(rand, 3, 8)}</li></ol>`,
  ]
  const pool: string[] = []
  for (let i = 0; i < size; i++) {
    const raw = pick(templates)()
    // Stored HTML is what the sanitiser produced: store exactly that.
    pool.push(sanitizeNoteHtml(raw))
  }
  return pool
}

function recordKey(collection: string, i: number, environment: string): string {
  const prefix = collection === 'orders' ? 'ORD' : 'CUS'
  return `${environment === 'production' ? '' : 'S'}${prefix}-${String(100_000 + i)}`
}

export function seedDatabase(dataDir: string, sizes: SeedSizes, log: (line: string) => void = () => {}): SeedResult {
  const started = performance.now()
  const store = openStore(dataDir)
  migrate(store.sqlite)
  const secret = loadInstanceSecret(dataDir)
  const rand = prng(20_261_121)
  const now = Date.now()

  // ── Structure through `apply` ──────────────────────────────────────────────
  const adminEmail = 'bench-admin@example.com'
  const emails = [adminEmail, ...Array.from({ length: sizes.users - 1 }, (_, i) => `user${String(i + 1).padStart(4, '0')}@example.com`)]
  const teamOf = (userIndex: number) => TEAMS[userIndex % TEAMS.length]!
  const recordsPerEnv = { production: Math.round(sizes.records * 0.8), staging: sizes.records - Math.round(sizes.records * 0.8) }
  const records: { environment: string; collection: string; id: string; data: Record<string, unknown> }[] = []
  const keys: Record<string, Record<string, string[]>> = { production: {}, staging: {} }
  for (const environment of ENVIRONMENTS) {
    const perCollection = Math.floor(recordsPerEnv[environment as 'production' | 'staging'] / COLLECTIONS.length)
    for (const collection of COLLECTIONS) {
      const list: string[] = (keys[environment]![collection] = [])
      for (let i = 0; i < perCollection; i++) {
        const id = recordKey(collection, i, environment)
        list.push(id)
        records.push({
          environment,
          collection,
          id,
          data: collection === 'orders'
            ? { status: 'paid', total: Math.round(rand() * 50_000) / 100, currency: 'EUR', customer: `CUS-${100_000 + Math.floor(rand() * perCollection)}` }
            : { name: NAMES[i % NAMES.length], tier: i % 10 === 0 ? 'vip' : 'standard', country: 'FR' },
        })
      }
    }
  }
  const workflows = Array.from({ length: sizes.workflows }, (_, i) => ({
    name: `bench-${String(i).padStart(3, '0')}`,
    environment: 'production',
    team: TEAMS[i % TEAMS.length]!,
    collection: COLLECTIONS[i % COLLECTIONS.length]!,
    webhook: { enabled: true, ratePerMinute: 100_000 },
    steps: [
      { type: 'load' },
      { type: 'update', set: { status: 'processed', lastRun: '{{run.id}}' } },
      { type: 'note', title: 'Processed by {{workflow.name}}', content: '<p>Record <strong>{{record.id}}</strong> processed by {{workflow.name}} (run {{run.id}}).</p>' },
    ],
  }))
  const approverTeamOf = (userIndex: number) => userIndex % APPROVER_TEAMS.length
  const approvals = sizes.tasks === undefined
    ? []
    : ENVIRONMENTS.flatMap((environment) =>
        Array.from({ length: APPROVAL_WORKFLOWS[environment as keyof typeof APPROVAL_WORKFLOWS] }, (_, i) => ({
          name: `approval-${String(i).padStart(2, '0')}`,
          environment,
          team: TEAMS[i % TEAMS.length]!,
          collection: COLLECTIONS[i % COLLECTIONS.length]!,
          steps: [
            { type: 'task', name: 'approve', title: 'Approve {{record.id}}', assignees: { teams: [APPROVER_TEAMS[i % APPROVER_TEAMS.length]!] } },
            { type: 'update', set: { approval: '{{tasks.approve.decision}}' } },
          ],
        })),
      )
  const approverTeams = approvals.length === 0 ? [] : APPROVER_TEAMS.map((name, t) => ({ name, members: emails.filter((_, i) => i > 0 && approverTeamOf(i) === t) }))
  const document = {
    users: emails.map((email, i) => ({ email, username: i === 0 ? 'Bench Admin' : `User ${i}` })),
    projects: [
      {
        name: PROJECT,
        environments: ENVIRONMENTS,
        teams: [...TEAMS.map((name) => ({ name, members: emails.filter((_, i) => teamOf(i) === name) })), ...approverTeams],
        members: emails.map((user, i) => ({ user, role: i === 0 ? 'admin' : i % 10 === 0 ? 'developer' : 'editor' })),
        collections: [...COLLECTIONS.map((name) => ({ name })), ...(sizes.typedRecords ? [{ name: TYPED_COLLECTION, schema: TYPED_SCHEMA }] : [])],
        records,
        workflows: [...workflows, ...approvals],
      },
    ],
  }
  const report = applyDocumentNow(document, { store, clock: systemClock, secret, baseUrl: 'http://bench.invalid' })
  const webhookPaths = report.workflows.filter((w) => !w.name.startsWith('approval-')).map((w) => {
    if (!w.webhook.url) throw new Error(`workflow ${w.name} has no webhook URL`)
    return new URL(w.webhook.url).pathname
  })
  const sqlite = store.sqlite
  const idOf = (sql: string, ...args: (string | number)[]) => (sqlite.prepare(sql).all(...args)[0] as { id: number }).id
  const projectId = idOf('SELECT id FROM projects WHERE name = ?', PROJECT)
  const envIds = ENVIRONMENTS.map((name) => idOf('SELECT id FROM environments WHERE project_id = ? AND name = ?', projectId, name))
  const teamIds = TEAMS.map((name) => idOf('SELECT id FROM teams WHERE project_id = ? AND name = ?', projectId, name))
  const collectionIds = COLLECTIONS.map((name) => idOf('SELECT id FROM collections WHERE project_id = ? AND name = ?', projectId, name))
  const userIds = emails.map((email) => idOf('SELECT id FROM users WHERE email = ?', email))
  const workflowIds = workflows.map((w) => idOf('SELECT w.id FROM workflows w JOIN renderings r ON r.id = w.rendering_id WHERE r.environment_id = ? AND w.name = ?', envIds[0]!, w.name))
  const tokenOf = (name: string, userIndex: number) =>
    store.commitNow(function* () {
      return yield* createToken(systemClock, {
        name,
        userId: userIds[userIndex]!,
        projectId,
        scopes: ['all'],
        expiresAt: null,
        createdWithSso: false,
        actorId: null,
        maxLiveTokens: DEFAULT_LIVE_TOKENS_PER_USER,
      })
    }).value
  const adminToken = tokenOf('bench admin', 0)
  const structureMs = performance.now() - started
  log(`structure via apply: ${emails.length} users, ${records.length} records, ${workflows.length} workflows in ${(structureMs / 1000).toFixed(1)} s`)

  // ── Notes straight into the schema ─────────────────────────────────────────
  const notesStarted = performance.now()
  sqlite.run('PRAGMA cache_size = -524288') // 512 MiB for this connection: index pages stay in memory while seeding
  const insertNote = sqlite.prepare(
    `INSERT INTO notes (environment_id, team_id, collection_id, record_id, title, user_id, created_at, updated_at, archived_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
  const insertMessage = sqlite.prepare('INSERT INTO note_messages (note_id, user_id, content, created_at) VALUES (?, ?, ?, ?)')
  const insertActivity = sqlite.prepare(
    `INSERT INTO activity_logs (environment_id, type, action, label, user_id, team_id, collection_id, token_id, created_at)
     VALUES (?, 'write', 'createNote', ?, ?, ?, ?, NULL, ?)`,
  )
  const insertActivityRecord = sqlite.prepare('INSERT INTO activity_log_records (log_id, environment_id, record_id) VALUES (?, ?, ?)')
  // Bulk load: the secondary indexes of the bulk tables are dropped and rebuilt afterwards from the very SQL
  // the migrations created them with (a sorted build beats a million random B-tree inserts).
  const bulkTables = [
    'notes', 'note_messages', 'activity_logs', 'activity_log_records',
    ...(sizes.tasks ? ['runs', 'tasks', 'task_assignees', 'task_decisions'] : []),
    ...(sizes.typedRecords ? ['records'] : []),
  ]
  const indexes = sqlite
    .prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN (${bulkTables.map(() => '?').join(', ')})`)
    .all(...bulkTables) as { name: string; sql: string }[]
  for (const index of indexes) sqlite.run(`DROP INDEX "${index.name}"`)
  const pool = messagePool(rand, 4096)
  // Notes span the past; the newest stays more than a day old so notes the app creates later come after them.
  const spacing = 60_000
  let createdAt = now - sizes.notes * (spacing / 2) - 2 * 86_400_000
  const latestMessageAt = now - 3_600_000
  const half: number[] = []
  let messages = 0
  let activity = 0
  const sampleUserIndex = 7
  const sampleRecord = keys.production![COLLECTIONS[0]!]![42]!
  for (let done = 0; done < sizes.notes; ) {
    const count = Math.min(BATCH, sizes.notes - done)
    sqlite.transaction(() => {
      for (let i = 0; i < count; i++) {
        createdAt += 1 + Math.floor(rand() * (spacing - 1)) // strictly increasing in id order
        const envIndex = rand() < 0.75 ? 0 : 1
        const environment = ENVIRONMENTS[envIndex]!
        const collectionIndex = rand() < 0.6 ? 0 : 1
        const collection = COLLECTIONS[collectionIndex]!
        const envKeys = keys[environment]![collection]!
        // A few hot records get many notes; most get a handful.
        const recordId = rand() < 0.001 && environment === 'production' ? sampleRecord : envKeys[Math.floor(rand() * envKeys.length)]!
        const userIndex = Math.floor(rand() * userIds.length)
        const userId = userIds[userIndex]!
        const teamIndex = userIndex % TEAMS.length
        const title = `${TITLES[Math.floor(rand() * TITLES.length)]!} ${recordId}`
        const r = rand()
        const messageCount = r < 0.4 ? 1 : r < 0.7 ? 2 : r < 0.9 ? 3 : 4
        const times = [createdAt]
        let t = createdAt
        for (let m = 1; m < messageCount; m++) {
          t = Math.min(latestMessageAt, Math.max(t, t + 60_000 + Math.floor(rand() * 2 * 86_400_000)))
          times.push(t)
        }
        const archived = rand() < 0.03
        const updatedAt = archived ? Math.min(latestMessageAt, t + 3_600_000) : t
        const { lastInsertRowid } = insertNote.run(
          envIds[envIndex]!, teamIds[teamIndex]!, collectionIds[collectionIndex]!, recordId, title, userId,
          microsFromMillis(createdAt), microsFromMillis(Math.max(updatedAt, createdAt)), archived ? microsFromMillis(Math.max(updatedAt, createdAt)) : null,
        )
        const noteId = Number(lastInsertRowid)
        for (let m = 0; m < messageCount; m++) {
          const author = m === 0 ? userId : userIds[Math.floor(rand() * userIds.length)]!
          insertMessage.run(noteId, author, pool[Math.floor(rand() * pool.length)]!, microsFromMillis(times[m]!))
        }
        messages += messageCount
        const log = insertActivity.run(envIds[envIndex]!, `created note "${title}"`, userId, teamIds[teamIndex]!, collectionIds[collectionIndex]!, microsFromMillis(createdAt))
        insertActivityRecord.run(Number(log.lastInsertRowid), envIds[envIndex]!, recordId)
        activity++
        if (envIndex === 0) half.push(createdAt)
      }
    })()
    done += count
    if (done % 100_000 === 0 || done === sizes.notes) {
      const s = (performance.now() - notesStarted) / 1000
      log(`  ${done.toLocaleString('en-US')} notes, ${messages.toLocaleString('en-US')} messages (${Math.round(done / s).toLocaleString('en-US')} notes/s)`)
    }
  }
  const tasks = sizes.tasks && seedApprovalTasks(sizes.tasks)
  const typedRecords = sizes.typedRecords ? seedInvoices(sizes.typedRecords) : null
  const indexStarted = performance.now()
  for (const index of indexes) sqlite.run(index.sql)
  log(`  rebuilt ${indexes.length} indexes in ${((performance.now() - indexStarted) / 1000).toFixed(1)} s`)
  sqlite.run('PRAGMA wal_checkpoint(TRUNCATE)')
  // The tasks and the invoices are timed on their own (their indexes are rebuilt with the notes').
  const notesMs = performance.now() - notesStarted - (tasks ? tasks.seconds * 1000 : 0) - (typedRecords ? typedRecords.seconds * 1000 : 0)
  const halfway = half[Math.floor(half.length / 2)]!

  /** The tasks after the notes (the PRNG's draws for the notes stay those of a seed without tasks), then their people's tokens. */
  function seedApprovalTasks(taskSizes: TaskSeedSizes): Omit<SeededTasks, 'inboxToken' | 'deciderToken'> {
    const tasksStarted = performance.now()
    const approvalWorkflows = (
      sqlite
        .prepare(`SELECT w.id, w.active_version_id AS versionId, r.environment_id AS environmentId, r.team_id AS teamId, w.collection_id AS collectionId, c.name AS collection
          FROM workflows w JOIN renderings r ON r.id = w.rendering_id JOIN collections c ON c.id = w.collection_id WHERE w.name LIKE 'approval-%' ORDER BY w.id`)
        .all() as { id: number; versionId: number; environmentId: number; teamId: number; collectionId: number; collection: string }[]
    ).map((w): ApprovalWorkflow => {
      const environmentIndex = envIds.indexOf(w.environmentId)
      return { ...w, environmentIndex, records: keys[ENVIRONMENTS[environmentIndex]!]![w.collection]! }
    })
    const seeded = seedTasks(
      {
        sqlite, rand, environmentIds: envIds, workflows: approvalWorkflows, userIds,
        approverTeamIds: APPROVER_TEAMS.map((name) => idOf('SELECT id FROM teams WHERE project_id = ? AND name = ?', projectId, name)),
        approverTeamOf, inboxUserIndex: INBOX_USER_INDEX, deciderIndex: DECIDER_INDEX,
        // Every run finished within the default run retention (30 days): a server started on the seed deletes none.
        newestBefore: now - 2 * 86_400_000, spanMs: 25 * 86_400_000,
      },
      taskSizes,
    )
    const seconds = (performance.now() - tasksStarted) / 1000
    log(`  ${seeded.tasks.toLocaleString('en-US')} tasks (${seeded.open.toLocaleString('en-US')} open), ${seeded.assignees.toLocaleString('en-US')} assignees, ${seeded.decisions.toLocaleString('en-US')} decisions in ${seconds.toFixed(1)} s`)
    return { ...seeded, inboxUserEmail: emails[INBOX_USER_INDEX]!, deciderEmail: emails[DECIDER_INDEX]!, seconds }
  }
  /** The typed collection's records, after the tasks (the PRNG's earlier draws stay those of a seed without them). */
  function seedInvoices(count: number): SeededRecords {
    const started = performance.now()
    seedTypedRecords({
      sqlite, rand, count, batch: BATCH, environmentId: envIds[0]!,
      collectionId: idOf('SELECT id FROM collections WHERE project_id = ? AND name = ?', projectId, TYPED_COLLECTION),
      newestBefore: now - 86_400_000,
    })
    const seconds = (performance.now() - started) / 1000
    log(`  ${count.toLocaleString('en-US')} records of ${TYPED_COLLECTION} (typed, 2 indexed fields) in ${seconds.toFixed(1)} s`)
    return { collection: TYPED_COLLECTION, count, seconds }
  }
  const seededTasks: SeededTasks | null = tasks ? { ...tasks, inboxToken: tokenOf('bench inbox', INBOX_USER_INDEX), deciderToken: tokenOf('bench decider', DECIDER_INDEX) } : null
  store.close()
  const totalMs = performance.now() - started
  const rows = sizes.notes * 3 + messages // note + activity entry + its record row, and the messages
  return {
    dataDir,
    dbPath: store.path,
    project: PROJECT,
    environments: ENVIRONMENTS,
    teams: TEAMS,
    collections: COLLECTIONS,
    webhookPaths,
    workflowIds,
    workflowCollections: workflows.map((w) => w.collection),
    productionRecords: keys.production!,
    adminToken,
    adminEmail,
    sampleUserEmail: emails[sampleUserIndex]!,
    sampleUserTeam: teamOf(sampleUserIndex),
    sampleRecordId: sampleRecord,
    halfwayCreatedAt: new Date(halfway).toISOString(),
    notes: sizes.notes,
    messages,
    activityEntries: activity,
    timings: { structureMs, notesMs, totalMs },
    notesPerSecond: sizes.notes / (notesMs / 1000),
    rowsPerSecond: rows / (notesMs / 1000),
    tasks: seededTasks,
    typedRecords,
  }
}
