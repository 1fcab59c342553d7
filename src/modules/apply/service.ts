/**
 * `trellis apply`: declarative, idempotent bootstrap (DESIGN §9). The whole file is validated and written in
 * one IMMEDIATE transaction: a file with any problem changes nothing. Nothing is ever deleted: items the
 * database has and the file does not are reported as `notInFile`.
 */
import { parse as parseYaml, YAMLParseError } from 'yaml'
import type { Store } from '../../db/store.ts'
import { write, writeSync } from '../../db/write.ts'
import {
  firstEditingTeamId,
  firstProjectAdminId,
  hasImportedNote,
  listProjectMemberEmails,
  listProjectNames,
  listUserEmails,
} from '../../db/apply.ts'
import { insertImportedNote, nextNoteCreatedAt } from '../../db/notes.ts'
import { listProjectParts } from '../../db/records.ts'
import { listProjectWorkflowPlaces } from '../../db/workflows.ts'
import type { Clock } from '../../lib/clock.ts'
import { sanitizeNoteHtml } from '../../lib/html.ts'
import { canonicalJson } from '../../lib/json.ts'
import { latestMicros, parseIsoMicros } from '../../lib/time.ts'
import { formatProblems, joinPath, type Problem, schemaProblems } from '../../lib/validation.ts'
import { unstorableTextPath } from '../../lib/storable-text.ts'
import { appendActivityLog } from '../activity-logs/service.ts'
import { addTeamMember, setProjectMember, setUserDeactivated } from '../members/service.ts'
import { recordImportedNoteTime } from '../notes/service.ts'
import { createUser, findUserByEmail, hashPasswordSync, normalizeEmail, setInstanceAdmin, setUserPasswordHash, setUsername, verifyPasswordSync } from '../users/service.ts'
import { findProjectByName, roleIn } from '../directory/projects.ts'
import { checkedRecordData, findRecord, setCollectionFields, upsertRecord } from '../records/service.ts'
import { addProjectPart, createProject, setCollectionPermission, setProjectSso } from '../projects/structure.ts'
import { storeSso } from '../auth/oidc-settings.ts'
import { publishWorkflow, type WorkflowTarget } from '../workflows/service.ts'
import { webhookUrl } from '../../lib/webhook-url.ts'
import type { WorkflowDefinition } from '../workflows/definition.ts'
import { ApplyCallbacks, ApplyFile, type ApplyProject } from './model.ts'
import { splitWorkflowEntry, validateApplyFile } from './validate.ts'
import { type EventsSettings, setEvents } from '../workflow-events/service.ts'
import { listCallbackEndpoints } from '../../db/callbacks.ts'
import { findTriggerTarget } from '../../db/workflows.ts'
import { HttpError } from '../../lib/errors.ts'
import { type AllowList, NOTHING_ALLOWED } from '../../lib/outbound/policy.ts'
import { putSchedule, type ScheduleInput } from '../schedules/service.ts'
import { addCallbackEndpoint, type CallbackContext, type CallbackEndpointView, canonicalEvents, endpointView, setCallbackEvents } from '../callbacks/service.ts'
import type { Op } from '../../db/op.ts'
import { read, readSync } from '../../db/read.ts'

export class ApplyError extends Error {
  constructor(readonly problems: Problem[]) {
    super(formatProblems(problems))
  }
}

export interface Change {
  action: 'created' | 'updated' | 'published'
  kind: string
  name: string
}

export interface ApplyReport {
  created: number
  updated: number
  unchanged: number
  changes: Change[]
  /** In the database, not in the file: reported, never deleted. */
  notInFile: { kind: string; name: string }[]
  workflows: {
    project: string
    environment: string
    team: string
    name: string
    version: number
    webhook: { enabled: boolean; ratePerMinute: number | null; url: string | null }
    /**
     * When the file lists them: the workflow's callbacks; each this apply created with its secret and whole URL (shown
     * once), the others with their URL as reads show it (without its query).
     */
    callbacks?: (CallbackEndpointView & { secret?: string })[]
  }[]
}

export interface ApplyContext {
  store: Store
  clock: Clock
  secret: Buffer
  baseUrl: string
  /**
   * `--as EMAIL`: the user apply's record and note writes are attributed to in the activity log. Without it,
   * each project's first admin (lowest user id). The label always says `trellis apply`.
   */
  actorEmail?: string
  /** The outbound allow-list in effect: the addresses callback URLs may point to (default: none but public ones). */
  httpAllow?: AllowList
}

/** YAML or JSON (JSON is YAML); a syntax error is reported with its line. */
export function parseApplyText(text: string): unknown {
  try {
    return parseYaml(text, { prettyErrors: true, maxAliasCount: 100 })
  } catch (error) {
    if (error instanceof YAMLParseError) {
      const line = error.linePos?.[0]
      throw new ApplyError([{ path: line ? `(file) line ${line.line}` : '(file)', message: error.message.split('\n')[0] ?? 'syntax error' }])
    }
    throw error
  }
}

export async function applyDocument(document: unknown, ctx: ApplyContext): Promise<ApplyReport> {
  const file = checkedShape(document)
  // Password hashing is slow: do it before taking the write lock.
  const passwordHashes = await read(ctx.store, hashChangedPasswords(file))
  return write(ctx.store, () => applyFile(file, ctx, passwordHashes))
}

/** `applyDocument` at once, its transaction waiting in the driver for a lock (tests and the bench's seeding). */
export function applyDocumentNow(document: unknown, ctx: ApplyContext): ApplyReport {
  const file = checkedShape(document)
  const passwordHashes = readSync(ctx.store, hashChangedPasswords(file), 'applyDocumentNow')
  return writeSync(ctx.store, () => applyFile(file, ctx, passwordHashes), 'applyDocumentNow')
}

function checkedShape(document: unknown): ApplyFile {
  if (document === null || document === undefined) throw new ApplyError([{ path: '(file)', message: 'the file is empty' }])
  const shape = schemaProblems(ApplyFile, document)
  if (shape.length > 0) throw new ApplyError(shape)
  const unstorable = unstorableTextPath(document)
  if (unstorable !== null) throw new ApplyError([unstorable])
  return document as ApplyFile
}

/** The whole file, validated against the database and written, in the caller's transaction. */
function* applyFile(file: ApplyFile, ctx: ApplyContext, passwordHashes: Map<string, string>): Op<ApplyReport> {
  const problems = yield* validateApplyFile(file, ctx.actorEmail, ctx.httpAllow ?? NOTHING_ALLOWED)
  if (problems.length > 0) throw new ApplyError(problems)
  const writer = new ApplyWriter(ctx, passwordHashes)
  if (file.sso !== undefined) yield* writer.applySso(file.sso)
  yield* writer.applyUsers(file)
  for (const [p, project] of (file.projects ?? []).entries()) yield* writer.applyProject(project, p)
  if (file.projects) yield* writer.reportProjectsNotInFile(file.projects)
  return writer.report
}

/** email → new hash, for file users whose password is not already the stored one. */
function* hashChangedPasswords(file: ApplyFile): Op<Map<string, string>> {
  const hashes = new Map<string, string>()
  for (const user of file.users ?? []) {
    if (user.password === undefined || user.password.length < 12) continue
    const existing = yield* findUserByEmail(user.email)
    if (existing?.passwordHash && verifyPasswordSync(user.password, existing.passwordHash)) continue
    hashes.set(normalizeEmail(user.email), hashPasswordSync(user.password))
  }
  return hashes
}

class ApplyWriter {
  readonly report: ApplyReport = { created: 0, updated: 0, unchanged: 0, changes: [], notInFile: [], workflows: [] }

  constructor(
    private readonly ctx: ApplyContext,
    private readonly passwordHashes: Map<string, string>,
  ) {}

  private get now() {
    return this.ctx.clock.now()
  }

  private record(outcome: 'created' | 'updated' | 'unchanged' | 'published', kind: string, name: string) {
    if (outcome === 'unchanged') {
      this.report.unchanged++
      return
    }
    if (outcome === 'published') this.report.updated++
    else this.report[outcome]++
    this.report.changes.push({ action: outcome, kind, name })
  }

  /** Read by `serve` at its next start. */
  *applySso(sso: NonNullable<ApplyFile['sso']> | null) {
    const outcome = yield* storeSso(this.ctx.clock, sso)
    const name = sso?.issuer ?? 'identity provider'
    if (outcome === 'removed') this.record('updated', 'sso settings (removed)', name)
    else this.record(outcome, 'sso settings', name)
  }

  private *userId(email: string): Op<number> {
    const user = yield* findUserByEmail(email)
    if (!user) throw new Error(`user ${email} vanished during apply`)
    return user.id
  }

  *applyUsers(file: ApplyFile) {
    const fileUsers = file.users ?? []
    const outcomes = new Map<string, 'created' | 'updated' | 'unchanged'>()
    // Through the users services, so each change is validated and logged as from the console or the CLI, and a new
    // password or a deactivation ends the user's sessions. Grants come before every revocation or deactivation, so a
    // file may hand instance administration over (the last instance administrator is never removed: 409).
    for (const user of fileUsers) {
      const email = normalizeEmail(user.email)
      const hash = this.passwordHashes.get(email)
      const existing = yield* findUserByEmail(email)
      if (!existing) {
        yield* createUser(this.ctx.clock, {
          email, username: user.username, passwordHash: hash, disabled: user.disabled, isInstanceAdmin: user.instanceAdmin, actorId: null,
        })
        outcomes.set(email, 'created')
        continue
      }
      let changed = yield* setUsername(this.ctx.clock, existing, user.username, null)
      if (user.instanceAdmin === true) changed = (yield* setInstanceAdmin(this.ctx.clock, existing, true, null)) || changed
      if (hash) {
        yield* setUserPasswordHash(this.ctx.clock, existing.id, hash)
        changed = true
      }
      outcomes.set(email, changed ? 'updated' : 'unchanged')
    }
    for (const user of fileUsers) {
      const email = normalizeEmail(user.email)
      if (outcomes.get(email) === 'created') continue
      const existing = (yield* findUserByEmail(email))!
      let changed = user.instanceAdmin === false && (yield* setInstanceAdmin(this.ctx.clock, existing, false, null))
      if (user.disabled !== undefined) changed = (yield* setUserDeactivated(this.ctx.clock, existing.id, user.disabled, null)) || changed
      if (changed) outcomes.set(email, 'updated')
    }
    for (const [email, outcome] of outcomes) this.record(outcome, 'user', email)
    if (file.users) {
      const inFile = new Set(file.users.map((u) => normalizeEmail(u.email)))
      for (const email of (yield* listUserEmails())) {
        if (!inFile.has(email)) this.report.notInFile.push({ kind: 'user', name: email })
      }
    }
  }

  /** `index`: the project's place in the file, for problem paths. */
  *applyProject(spec: ApplyProject, index: number) {
    const project = yield* this.ensureProject(spec)
    const scope = yield* projectScope(project.id)
    const label = (name: string) => `${spec.name}/${name}`

    for (const name of spec.environments ?? []) {
      if (scope.environments.has(name)) {
        this.record('unchanged', 'environment', label(name))
        continue
      }
      scope.environments.set(name, (yield* addProjectPart(this.ctx.clock, 'environment', { projectId: project.id, name, actorId: null })))
      this.record('created', 'environment', label(name))
    }
    // Members first, so a new member's admin log reads "added with a permission level", then "joined teams".
    for (const member of spec.members ?? []) {
      const outcome = yield* setProjectMember(this.ctx.clock, {
        projectId: project.id, userId: yield* this.userId(member.user), role: member.role, actorId: null,
      })
      this.record(outcome, 'member', `${spec.name}/${normalizeEmail(member.user)}`)
    }
    for (const team of spec.teams ?? []) {
      let teamId = scope.teams.get(team.name)
      if (teamId === undefined) {
        teamId = yield* addProjectPart(this.ctx.clock, 'team', { projectId: project.id, name: team.name, actorId: null })
        scope.teams.set(team.name, teamId)
        this.record('created', 'team', label(team.name))
      } else {
        this.record('unchanged', 'team', label(team.name))
      }
      for (const email of team.members ?? []) {
        const outcome = yield* addTeamMember(this.ctx.clock, { projectId: project.id, teamId, userId: yield* this.userId(email), actorId: null })
        this.record(outcome, 'team member', `${label(team.name)}/${normalizeEmail(email)}`)
      }
    }
    for (const collection of spec.collections ?? []) (yield* this.applyCollection(project.id, scope, spec.name, collection))
    // Schemas once every collection exists: a relation may name one listed after it.
    for (const collection of spec.collections ?? []) (yield* this.applyCollectionSchema(project.id, scope, spec.name, collection))
    for (const [r, record] of (spec.records ?? []).entries()) (yield* this.applyRecord(project.id, scope, `projects[${index}].records[${r}]`, spec.name, record))
    for (const [w, entry] of (spec.workflows ?? []).entries()) (yield* this.applyWorkflow(project.id, scope, spec.name, entry, `projects[${index}].workflows[${w}]`))
    // Oldest first, so that within one file id order and createdAt order agree (DESIGN §3 paging).
    const byTime = [...(spec.notes ?? [])].sort(
      (a, b) => (a.createdAt ? parseIsoMicros(a.createdAt)! : Number.MAX_SAFE_INTEGER) - (b.createdAt ? parseIsoMicros(b.createdAt)! : Number.MAX_SAFE_INTEGER),
    )
    for (const note of byTime) (yield* this.importNote(scope, spec.name, note))
    yield* this.reportNotInFile(project.id, spec, scope)
  }

  private *ensureProject(spec: ApplyProject) {
    const existing = yield* findProjectByName(spec.name)
    if (!existing) {
      const project = yield* createProject(this.ctx.clock, { name: spec.name, sso: spec.sso, actorId: null })
      this.record('created', 'project', spec.name)
      return project
    }
    if (spec.sso !== undefined && (yield* setProjectSso(this.ctx.clock, existing, spec.sso, null)) === 'updated') {
        this.record('updated', 'project', spec.name)
      } else {
        this.record('unchanged', 'project', spec.name)
    }
    return existing
  }

  private *applyCollection(projectId: number, scope: ProjectScope, projectName: string, spec: NonNullable<ApplyProject['collections']>[number]) {
    let collectionId = scope.collections.get(spec.name)
    let outcome: 'created' | 'updated' | 'unchanged' = 'unchanged'
    if (collectionId === undefined) {
      collectionId = yield* addProjectPart(this.ctx.clock, 'collection', { projectId, name: spec.name, actorId: null })
      scope.collections.set(spec.name, collectionId)
      outcome = 'created'
    }
    for (const [teamName, permission] of Object.entries(spec.permissions ?? {})) {
      const changed = yield* setCollectionPermission(this.ctx.clock, {
        projectId, collectionId, collectionName: spec.name, teamId: scope.teams.get(teamName)!, teamName,
        read: permission.read ?? true, edit: permission.edit ?? true, actorId: null,
      })
      if (changed !== 'unchanged' && outcome === 'unchanged') outcome = 'updated'
    }
    this.record(outcome, 'collection', `${projectName}/${spec.name}`)
  }

  private *applyCollectionSchema(projectId: number, scope: ProjectScope, projectName: string, spec: NonNullable<ApplyProject['collections']>[number]) {
    if (!spec.schema) return
    const outcome = yield* setCollectionFields(this.ctx.clock, {
      projectId, collectionId: scope.collections.get(spec.name)!, collectionName: spec.name, fields: spec.schema.fields, actorId: null,
    })
    this.record(outcome, 'collection schema', `${projectName}/${spec.name}`)
  }

  private *applyRecord(projectId: number, scope: ProjectScope, at: string, projectName: string, spec: NonNullable<ApplyProject['records']>[number]) {
    const environmentId = scope.environments.get(spec.environment)!
    const collectionId = scope.collections.get(spec.collection)!
    const name = `${projectName}/${spec.environment}/${spec.collection}/${spec.id}`
    const existing = yield* findRecord({ environmentId, collectionId }, spec.id)
    const checked = yield* checkedRecordData({ environmentId, collectionId }, spec.data)
    // Attribution is looked up only for a write (an unchanged file needs no admin in the project); data is judged
    // by the schema only when it would be written.
    if (existing && canonicalJson(JSON.parse(existing.data)) === canonicalJson(checked.data)) {
      this.record('unchanged', 'record', name)
      return
    }
    if (checked.problems.length > 0) throw new ApplyError(checked.problems.map((p) => ({ path: joinPath(`${at}.data`, p.field), message: p.message })))
    const outcome = yield* upsertRecord(this.ctx.clock, {
      environmentId,
      collectionId,
      recordKey: spec.id,
      data: spec.data,
      userId: yield* this.actorFor(projectId, projectName, at),
      teamId: spec.team === undefined ? yield* this.editingTeam(projectId, collectionId, spec.collection, at) : scope.teams.get(spec.team)!,
      via: 'by trellis apply',
    })
    this.record(outcome.outcome, 'record', name)
  }

  /** Record attribution, found once per project and per collection (a file may hold thousands of records). */
  private readonly actors = new Map<number, number>()
  private readonly editingTeams = new Map<number, number>()

  /** Who apply's record writes in a project are attributed to: `--as`, else the project's first admin. */
  private *actorFor(projectId: number, projectName: string, at: string): Op<number> {
    let actor = this.actors.get(projectId)
    if (actor === undefined) {
      actor = yield* this.findActor(projectId, projectName, at)
      this.actors.set(projectId, actor)
    }
    return actor
  }

  private *findActor(projectId: number, projectName: string, at: string): Op<number> {
    if (this.ctx.actorEmail !== undefined) {
      const actor = (yield* findUserByEmail(this.ctx.actorEmail))!
      const problem = actor.disabledAt !== null ? 'is deactivated' : (yield* roleIn(projectId, actor.id)) === null ? `is not a member of project ${projectName}` : null
      if (problem) throw new ApplyError([{ path: '--as', message: `${this.ctx.actorEmail} ${problem}` }])
      return actor.id
    }
    const admin = yield* firstProjectAdminId(projectId)
    if (admin === undefined) {
      throw new ApplyError([{ path: at, message: `project ${projectName} has no admin to attribute record changes to: add an admin member or pass --as EMAIL` }])
    }
    return admin
  }

  /** The team a record write is logged under when the file names none: the oldest team allowed to edit the collection. */
  private *editingTeam(projectId: number, collectionId: number, collectionName: string, at: string): Op<number> {
    const known = this.editingTeams.get(collectionId)
    if (known !== undefined) return known
    const team = yield* firstEditingTeamId(projectId, collectionId)
    if (team === undefined) throw new ApplyError([{ path: `${at}.team`, message: `no team may edit ${collectionName}: name the record's team` }])
    this.editingTeams.set(collectionId, team)
    return team
  }

  /** `at`: the workflow's place in the file, for problem paths. */
  private *applyWorkflow(projectId: number, scope: ProjectScope, projectName: string, fileEntry: unknown, at: string) {
    const { definition: raw, settings: { callbacks, schedule, events } } = splitWorkflowEntry(fileEntry)
    const definition = raw as WorkflowDefinition
    const target: WorkflowTarget = {
      projectId,
      environmentId: scope.environments.get(definition.environment)!,
      teamId: scope.teams.get(definition.team)!,
      collectionId: scope.collections.get(definition.collection)!,
    }
    let result
    try {
      result = yield* publishWorkflow(this.ctx.clock, target, definition, null, at)
    } catch (error) {
      // The steps against the collection's schema: each problem already names its place in the file.
      const details = error instanceof HttpError ? (error.extra.details as { field: string; message: string }[] | undefined) : undefined
      if (details) throw new ApplyError(details.map((d) => ({ path: d.field, message: d.message })))
      throw error
    }
    const name = `${projectName}/${definition.environment}/${definition.team}/${definition.name}`
    this.record(result.outcome === 'unchanged' && result.triggerChanged ? 'updated' : result.outcome, 'workflow', name)
    const trigger = result.trigger
    this.report.workflows.push({
      project: projectName,
      environment: definition.environment,
      team: definition.team,
      name: definition.name,
      version: result.version,
      webhook: {
        enabled: trigger.enabled,
        ratePerMinute: trigger.ratePerMinute,
        url: trigger.enabled
          ? webhookUrl(this.ctx.secret, this.ctx.baseUrl, { workflowId: result.workflowId, renderingId: result.renderingId, generation: trigger.generation })
          : null,
      },
      ...(callbacks === undefined ? {} : { callbacks: yield* this.applyCallbacks(result.workflowId, name, callbacks as ApplyCallbacks, `${at}.callbacks`) }),
    })
    if (schedule !== undefined) yield* this.applySchedule(result.workflowId, name, schedule as ScheduleInput, `${at}.schedule`)
    if (events !== undefined) yield* this.applyEvents(result.workflowId, name, events as EventsSettings, `${at}.events`)
  }

  /** The file's schedule of a workflow, checked and saved as the API's PUT does (a workflow's schedule not in the file is kept). */
  private *applySchedule(workflowId: number, workflowName: string, schedule: ScheduleInput, at: string) {
    const target = (yield* findTriggerTarget(workflowId))!
    const saved = yield* namedInFile(at, putSchedule(this.ctx.clock, target, schedule, null))
    this.record(saved.outcome, 'schedule', workflowName)
  }

  /** The file's `events` of a workflow, checked as the API checks them; unchanged: nothing written. */
  private *applyEvents(workflowId: number, workflowName: string, events: EventsSettings, at: string) {
    const target = (yield* findTriggerTarget(workflowId))!
    const saved = yield* namedInFile(at, setEvents(this.ctx.clock, target, events, null))
    this.record(saved.changed ? 'updated' : 'unchanged', 'workflow events', workflowName)
  }

  /**
   * The file's callbacks of a workflow, matched by URL: a new one is added (its secret and whole URL in the report,
   * once), a known one's events set; the workflow's others are reported `notInFile` and kept, as every other list of
   * the file. Past its creation an endpoint's URL is shown as every read shows it (`endpointView`: without its query).
   */
  private *applyCallbacks(workflowId: number, workflowName: string, callbacks: ApplyCallbacks, at: string) {
    const target = (yield* findTriggerTarget(workflowId))!
    const ctx: CallbackContext = { clock: this.ctx.clock, secret: this.ctx.secret, allow: this.ctx.httpAllow ?? NOTHING_ALLOWED, actorId: null }
    const existing = yield* listCallbackEndpoints(workflowId)
    const shown: NonNullable<ApplyReport['workflows'][number]['callbacks']> = []
    const label = (url: string) => `${workflowName} → ${url}`
    for (const [c, callback] of callbacks.entries()) {
      const known = existing.find((endpoint) => endpoint.url === callback.url)
      if (known) {
        const view = endpointView(known)
        const changed = yield* setCallbackEvents(ctx, target, known, callback.events)
        this.record(changed ? 'updated' : 'unchanged', 'callback', label(view.url))
        shown.push({ ...view, events: canonicalEvents(callback.events) })
        continue
      }
      try {
        shown.push(yield* addCallbackEndpoint({ ...ctx, urlField: `${at}[${c}].url` }, target, callback))
      } catch (error) {
        if (error instanceof HttpError) throw new ApplyError([{ path: `${at}[${c}]`, message: error.message }])
        throw error
      }
      this.record('created', 'callback', label(callback.url))
    }
    const inFile = new Set(callbacks.map((callback) => callback.url))
    for (const endpoint of existing) if (!inFile.has(endpoint.url)) this.report.notInFile.push({ kind: 'callback', name: label(endpointView(endpoint).url) })
    return shown
  }

  /** Idempotent on (environment, recordId, user, createdAt, title); without createdAt, on the other four. */
  private *importNote(scope: ProjectScope, projectName: string, spec: NonNullable<ApplyProject['notes']>[number]) {
    const environmentId = scope.environments.get(spec.environment)!
    const userId = yield* this.userId(spec.user)
    const givenCreatedAt = spec.createdAt === undefined ? undefined : parseIsoMicros(spec.createdAt)!
    const name = `${projectName}/${spec.environment}/${spec.recordId}: ${spec.title}`
    if (yield* hasImportedNote({ environmentId, recordId: spec.recordId, userId, title: spec.title, createdAt: givenCreatedAt })) {
      this.record('unchanged', 'note', name)
      return
    }
    if (givenCreatedAt !== undefined) yield* recordImportedNoteTime(environmentId, givenCreatedAt)
    const createdAt = givenCreatedAt ?? (yield* nextNoteCreatedAt(environmentId, this.now))
    const messages = []
    for (const m of spec.messages ?? []) {
      messages.push({
        userId: (yield* this.userId(m.user)),
        content: sanitizeNoteHtml(m.content),
        createdAt: m.createdAt === undefined ? createdAt : parseIsoMicros(m.createdAt)!,
      })
    }
    const archivedAt = spec.archivedAt === undefined ? null : parseIsoMicros(spec.archivedAt)!
    const updatedAt =
      spec.updatedAt !== undefined
        ? parseIsoMicros(spec.updatedAt)!
        : latestMicros(createdAt, archivedAt ?? createdAt, ...messages.map((m) => m.createdAt))
    yield* insertImportedNote({
        environmentId,
        teamId: scope.teams.get(spec.team)!,
        collectionId: scope.collections.get(spec.collection)!,
        recordId: spec.recordId,
        title: spec.title,
        userId,
        createdAt,
        updatedAt,
        archivedAt,
      },
      messages,
      givenCreatedAt !== undefined,
    )
    // The entry is the import (now); the note keeps the times the file gives.
    yield* appendActivityLog(this.ctx.clock, {
      environmentId,
      type: 'write',
      action: 'createNote',
      label: 'imported by trellis apply',
      userId,
      teamId: scope.teams.get(spec.team)!,
      collectionId: scope.collections.get(spec.collection)!,
      recordIds: [spec.recordId],
    })
    this.record('created', 'note', name)
  }

  private *reportNotInFile(projectId: number, spec: ApplyProject, scope: ProjectScope) {
    const missing = (kind: string, listed: string[] | undefined, existing: Iterable<string>) => {
      if (!listed) return
      const inFile = new Set(listed)
      for (const name of existing) if (!inFile.has(name)) this.report.notInFile.push({ kind, name: `${spec.name}/${name}` })
    }
    missing('environment', spec.environments, scope.environments.keys())
    missing('team', spec.teams?.map((t) => t.name), scope.teams.keys())
    missing('collection', spec.collections?.map((c) => c.name), scope.collections.keys())
    missing('member', spec.members?.map((m) => normalizeEmail(m.user)), (yield* listProjectMemberEmails(projectId)))
    const existingWorkflows = yield* listProjectWorkflowPlaces(projectId)
    missing(
      'workflow',
      (spec.workflows as WorkflowDefinition[] | undefined)?.map((w) => `${w.environment}/${w.team}/${w.name}`),
      existingWorkflows.map((w) => `${w.environment}/${w.team}/${w.name}`),
    )
  }

  *reportProjectsNotInFile(listed: ApplyProject[]) {
    const inFile = new Set(listed.map((p) => p.name))
    for (const name of (yield* listProjectNames())) {
      if (!inFile.has(name)) this.report.notInFile.push({ kind: 'project', name })
    }
  }
}

/** Name → id maps of one project, kept current as the writer creates rows. */
interface ProjectScope {
  readonly environments: Map<string, number>
  readonly teams: Map<string, number>
  readonly collections: Map<string, number>
}

function* projectScope(projectId: number): Op<ProjectScope> {
  const byName = (rows: { name: string; id: number }[]) => new Map(rows.map((r) => [r.name, r.id]))
  return {
    environments: byName(yield* listProjectParts('environment', projectId)),
    teams: byName(yield* listProjectParts('team', projectId)),
    collections: byName(yield* listProjectParts('collection', projectId)),
  }
}

/** A save the API checks, its problems named at their place in the file (`projects[0].workflows[1].schedule.cron`). */
function* namedInFile<T>(at: string, save: Op<T>): Op<T> {
  try {
    return yield* save
  } catch (error) {
    const details = error instanceof HttpError ? (error.extra.details as { field: string; message: string }[] | undefined) : undefined
    if (details) throw new ApplyError(details.map((d) => ({ path: `${at}.${d.field}`, message: d.message })))
    throw error
  }
}
