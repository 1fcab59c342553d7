/**
 * Every check of an apply file that needs the database (unknown users, teams, environments…), run inside
 * the apply transaction so what was checked is what gets written. Paths name the offending item:
 * `projects[0].teams[1].members[0]: unknown user bob@example.com`.
 */
import { ScheduleBody } from '../schedules/model.ts'
import { issuerProblem } from '../../config.ts'
import { listUserEmails } from '../../db/apply.ts'
import { listProjectParts } from '../../db/records.ts'
import { parseIsoDateTime, parseIsoMicros } from '../../lib/time.ts'
import { callbackUrlProblem } from '../../lib/callbacks.ts'
import type { AllowList } from '../../lib/outbound/policy.ts'
import { type Problem, schemaProblems } from '../../lib/validation.ts'
import { WorkflowEvents } from '../workflow-events/model.ts'
import { findProjectByName } from '../directory/projects.ts'
import { schemaFieldProblems } from '../records/schema.ts'
import { emailProblem, normalizeEmail, passwordProblem, usernameProblem } from '../users/service.ts'
import { workflowDefinitionProblems, type WorkflowDefinition } from '../workflows/definition.ts'
import { ApplyCallbacks, type ApplyFile, type ApplyProject } from './model.ts'
import type { Op } from '../../db/op.ts'

/** Names that exist for a project, in the database or in the file. */
interface ProjectNames {
  environments: Set<string>
  teams: Set<string>
  collections: Set<string>
}

/** `actorEmail` is `--as`: it must name a user of the database or the file; `allow`: the outbound allow-list in effect, for callback URLs. */
export function* validateApplyFile(file: ApplyFile, actorEmail: string | undefined, allow: AllowList): Op<Problem[]> {
  const problems: Problem[] = []
  const problem = (path: string, message: string) => problems.push({ path, message })

  if (file.sso) {
    const issuer = issuerProblem(file.sso.issuer)
    if (issuer) problem('sso.issuer', `issuer ${issuer}`)
  }
  const knownUsers = new Set((yield* listUserEmails()))
  const fileUsers = new Set<string>()
  file.users?.forEach((user, i) => {
    const at = `users[${i}]`
    const email = emailProblem(user.email)
    if (email) problem(`${at}.email`, email)
    const username = usernameProblem(user.username)
    if (username) problem(`${at}.username`, username)
    if (user.password !== undefined) {
      const password = passwordProblem(user.password)
      if (password) problem(`${at}.password`, password)
    }
    const key = normalizeEmail(user.email)
    if (fileUsers.has(key)) problem(`${at}.email`, `duplicate user ${key}`)
    fileUsers.add(key)
    knownUsers.add(key)
  })
  const checkUser = (path: string, email: string) => {
    if (!knownUsers.has(normalizeEmail(email))) problem(path, `unknown user ${email}`)
  }
  if (actorEmail !== undefined) checkUser('--as', actorEmail)

  const projectNames = new Set<string>()
  for (const [p, project] of (file.projects ?? []).entries()) {
    const at = `projects[${p}]`
    if (projectNames.has(project.name)) problem(`${at}.name`, `duplicate project ${project.name}`)
    projectNames.add(project.name)
    const names = yield* existingNames(project.name)
    checkProjectStructure(project, at, names, problem, checkUser)
    checkProjectContent(project, at, names, problem, checkUser, allow)
  }
  return problems
}

type Report = (path: string, message: string) => void

function* existingNames(projectName: string): Op<ProjectNames> {
  const project = yield* findProjectByName(projectName)
  if (!project) return { environments: new Set(), teams: new Set(), collections: new Set() }
  const namesOf = (rows: { name: string }[]) => new Set(rows.map((r) => r.name))
  return {
    environments: namesOf(yield* listProjectParts('environment', project.id)),
    teams: namesOf(yield* listProjectParts('team', project.id)),
    collections: namesOf(yield* listProjectParts('collection', project.id)),
  }
}

/** Adds each name to `known`, reporting duplicates within the file. */
function declareNames(names: string[] | undefined, at: string, kind: string, known: Set<string>, problem: Report) {
  const inFile = new Set<string>()
  names?.forEach((name, i) => {
    if (inFile.has(name)) problem(`${at}[${i}]`, `duplicate ${kind} ${name}`)
    inFile.add(name)
    known.add(name)
  })
}

function checkProjectStructure(project: ApplyProject, at: string, names: ProjectNames, problem: Report, checkUser: Report) {
  declareNames(project.environments, `${at}.environments`, 'environment', names.environments, problem)
  declareNames(project.teams?.map((t) => t.name), `${at}.teams`, 'team', names.teams, problem)
  declareNames(project.collections?.map((c) => c.name), `${at}.collections`, 'collection', names.collections, problem)

  project.teams?.forEach((team, t) => {
    team.members?.forEach((email, m) => checkUser(`${at}.teams[${t}].members[${m}]`, email))
  })
  const members = new Set<string>()
  project.members?.forEach((member, m) => {
    checkUser(`${at}.members[${m}].user`, member.user)
    const key = normalizeEmail(member.user)
    if (members.has(key)) problem(`${at}.members[${m}].user`, `duplicate member ${member.user}`)
    members.add(key)
  })
  project.collections?.forEach((collection, c) => {
    for (const team of Object.keys(collection.permissions ?? {})) {
      if (!names.teams.has(team)) problem(`${at}.collections[${c}].permissions.${team}`, `unknown team ${team}`)
    }
    if (collection.schema) {
      for (const p of schemaFieldProblems(collection.schema.fields, names.collections, `${at}.collections[${c}].schema.fields`)) problem(p.path, p.message)
    }
  })
}

/** The keys of a workflow entry that are not part of its definition's versions: each has its own save. */
const WORKFLOW_SETTINGS = ['callbacks', 'schedule', 'events'] as const

/**
 * A workflow entry of the file: its definition, and the settings it gives that are not part of the definition
 * (`callbacks`, `schedule`, `events`; docs/workflows.md), each undefined when absent.
 */
export function splitWorkflowEntry(entry: unknown): { definition: unknown; settings: Partial<Record<(typeof WORKFLOW_SETTINGS)[number], unknown>> } {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return { definition: entry, settings: {} }
  const definition: Record<string, unknown> = { ...(entry as Record<string, unknown>) }
  const settings: Partial<Record<(typeof WORKFLOW_SETTINGS)[number], unknown>> = {}
  for (const key of WORKFLOW_SETTINGS) {
    if (!Object.hasOwn(definition, key)) continue
    settings[key] = definition[key]
    delete definition[key]
  }
  return { definition, settings }
}

/** A workflow's callbacks: their shape, each URL as the API checks it, no URL twice. */
function checkCallbacks(callbacks: unknown, at: string, allow: AllowList, problem: Report) {
  const shape = schemaProblems(ApplyCallbacks, callbacks, at)
  if (shape.length > 0) {
    for (const p of shape) problem(p.path, p.message)
    return
  }
  const urls = new Set<string>()
  ;(callbacks as ApplyCallbacks).forEach((callback, c) => {
    const urlProblem = callbackUrlProblem(callback.url, allow)
    if (urlProblem) problem(`${at}[${c}].url`, urlProblem)
    if (urls.has(callback.url)) problem(`${at}[${c}].url`, `duplicate callback ${callback.url}`)
    urls.add(callback.url)
  })
}

function checkProjectContent(project: ApplyProject, at: string, names: ProjectNames, problem: Report, checkUser: Report, allow: AllowList) {
  const known = (path: string, kind: keyof ProjectNames, singular: string, name: string) => {
    if (!names[kind].has(name)) problem(path, `unknown ${singular} ${name}`)
  }
  const recordKeys = new Set<string>()
  project.records?.forEach((record, r) => {
    const rat = `${at}.records[${r}]`
    known(`${rat}.environment`, 'environments', 'environment', record.environment)
    known(`${rat}.collection`, 'collections', 'collection', record.collection)
    if (record.team !== undefined) known(`${rat}.team`, 'teams', 'team', record.team)
    const key = JSON.stringify([record.environment, record.collection, record.id])
    if (recordKeys.has(key)) problem(`${rat}.id`, `duplicate record ${record.collection}/${record.id} in ${record.environment}`)
    recordKeys.add(key)
  })

  const workflowKeys = new Set<string>()
  project.workflows?.forEach((entry, w) => {
    const wat = `${at}.workflows[${w}]`
    const { definition: raw, settings: { callbacks, schedule, events } } = splitWorkflowEntry(entry)
    // Its shape here; the cron, the filter and the runAs user as the API checks them, when it is applied.
    if (schedule !== undefined) for (const p of schemaProblems(ScheduleBody, schedule, `${wat}.schedule`)) problem(p.path, p.message)
    if (callbacks !== undefined) checkCallbacks(callbacks, `${wat}.callbacks`, allow, problem)
    // The shape here; the user, fields and filter against the database when applied (as the API checks them).
    if (events !== undefined) for (const p of schemaProblems(WorkflowEvents, events, `${wat}.events`)) problem(p.path, p.message)
    const definitionProblems = workflowDefinitionProblems(raw, wat)
    if (definitionProblems.length > 0) {
      for (const p of definitionProblems) problem(p.path, p.message)
      return
    }
    const workflow = raw as WorkflowDefinition
    known(`${wat}.environment`, 'environments', 'environment', workflow.environment)
    known(`${wat}.team`, 'teams', 'team', workflow.team)
    known(`${wat}.collection`, 'collections', 'collection', workflow.collection)
    const key = JSON.stringify([workflow.environment, workflow.team, workflow.name])
    if (workflowKeys.has(key)) problem(`${wat}.name`, `duplicate workflow ${workflow.name} for ${workflow.team} in ${workflow.environment}`)
    workflowKeys.add(key)
  })

  project.notes?.forEach((note, n) => {
    const nat = `${at}.notes[${n}]`
    known(`${nat}.environment`, 'environments', 'environment', note.environment)
    known(`${nat}.team`, 'teams', 'team', note.team)
    known(`${nat}.collection`, 'collections', 'collection', note.collection)
    checkUser(`${nat}.user`, note.user)
    const checkTime = (path: string, value: string | undefined) => {
      if (value === undefined || parseIsoMicros(value) !== null) return
      problem(path, parseIsoDateTime(value) === null ? `invalid ISO 8601 date-time "${value}"` : `"${value}" is outside the years 1685–2255 a note time can hold`)
    }
    for (const field of ['createdAt', 'updatedAt', 'archivedAt'] as const) checkTime(`${nat}.${field}`, note[field])
    note.messages?.forEach((message, m) => {
      checkUser(`${nat}.messages[${m}].user`, message.user)
      checkTime(`${nat}.messages[${m}].createdAt`, message.createdAt)
    })
  })
}
