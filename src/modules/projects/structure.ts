/**
 * Changing a project's structure — the project itself, its environments, teams, collections and their team
 * permissions — each change with its admin log entry. The one implementation behind the management API (and so
 * the console) and `trellis apply`: same validation, same entries. Names are matched case-sensitively, as
 * everywhere; a rename keeps every id, so webhook URLs (id-based) and tokens survive it.
 */
import {
  findCollectionPermission,
  findPartByName,
  insertPart,
  insertProject,
  type ProjectPart,
  renamePart,
  updateProject,
  writeCollectionPermission,
} from '../../db/projects.ts'
import type { Clock } from '../../lib/clock.ts'
import { conflict, invalidField, notFound } from '../../lib/errors.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import type { Outcome } from '../members/service.ts'
import { findProjectByName, type Project } from '../directory/projects.ts'
import type { Op } from '../../db/op.ts'
import { withArticle } from '../../lib/words.ts'

export const NAME_MAX_LENGTH = 200
const CONTROL = /[\u0000-\u001f\u007f]/

/** Why a project, environment, team or collection name is refused, or null. */
export function nameProblem(name: string): string | null {
  if (name.trim() === '') return 'must not be blank'
  if (name.length > NAME_MAX_LENGTH) return `must be at most ${NAME_MAX_LENGTH} characters`
  if (CONTROL.test(name)) return 'must not contain control characters'
  if (name !== name.trim()) return 'must not start or end with spaces'
  return null
}

function checkName(field: string, name: string): void {
  const problem = nameProblem(name)
  if (problem) throw invalidField(field, `${field} ${problem}`)
}


/** The admin log value of each part: the compatibility document's shapes for environments and teams. */
function partValue(part: ProjectPart, name: string) {
  return part === 'environment' ? { name, codeCustomizationVersion: 0 } : { name }
}

/** Extension values keep the document's `{name}` shape, with a readable description (docs/api.md "Activity and admin logs"). */
const projectValue = (project: Pick<Project, 'name' | 'sso'>) => ({ name: `${project.name} (SSO ${project.sso ? 'on' : 'off'})` })

/** A new project (409 `name_taken` when the name is used). Its admin log starts with the creation (resource `project`). */
export function* createProject(clock: Clock, input: { name: string; sso?: boolean; actorId: number | null }): Op<Project> {
  checkName('name', input.name)
  if ((yield* findProjectByName(input.name))) throw conflict('name_taken', `A project named ${input.name} already exists`)
  const project = yield* insertProject({ name: input.name, sso: input.sso ?? false, createdAt: clock.now() })
  yield* appendAdminLog(clock, { projectId: project.id, type: 'add', resource: 'project', actorId: input.actorId, newValue: projectValue(project) })
  return project
}

/** Renames a project: its tokens, members and webhook URLs stay; API paths and apply files use the new name. */
export function* renameProject(clock: Clock, project: Project, name: string, actorId: number | null, field = 'name'): Op<Outcome> {
  checkName(field, name)
  if (name === project.name) return 'unchanged'
  if ((yield* findProjectByName(name))) throw conflict('name_taken', `A project named ${name} already exists`)
  yield* updateProject(project.id, { name })
  yield* appendAdminLog(clock, {
    projectId: project.id, type: 'update', resource: 'project', actorId,
    previousValue: projectValue(project), newValue: projectValue({ name, sso: project.sso }),
  })
  return 'updated'
}

/**
 * Turns SSO on or off (docs/sso.md "Single sign-on"): on, every token not generated in an SSO session is refused from
 * the next request (403 sso_required) and password sessions cannot open the project; off, they work again.
 */
export function* setProjectSso(clock: Clock, project: Project, sso: boolean, actorId: number | null): Op<Outcome> {
  if (project.sso === sso) return 'unchanged'
  yield* updateProject(project.id, { sso })
  yield* appendAdminLog(clock, {
    projectId: project.id, type: 'update', resource: 'project', actorId,
    previousValue: projectValue(project), newValue: projectValue({ name: project.name, sso }),
  })
  return 'updated'
}

/** Adds an environment, a team or a collection to a project (409 `name_taken` when the project has one by that name). */
export function* addProjectPart(clock: Clock, part: ProjectPart, input: { projectId: number; name: string; actorId: number | null; field?: string }): Op<number> {
  checkName(input.field ?? 'name', input.name)
  if ((yield* findPartByName(part, input.projectId, input.name))) throw conflict('name_taken', `The project already has ${withArticle(part)} named ${input.name}`)
  const id = yield* insertPart(part, { projectId: input.projectId, name: input.name, createdAt: clock.now() })
  yield* appendAdminLog(clock, { projectId: input.projectId, type: 'add', resource: part, actorId: input.actorId, newValue: partValue(part, input.name) })
  return id
}

/** Renames an environment, a team or a collection (404 when unknown, 409 when the new name is taken). */
export function* renameProjectPart(
  clock: Clock,
  part: ProjectPart,
  input: { projectId: number; name: string; newName: string; actorId: number | null; field?: string },
): Op<Outcome> {
  checkName(input.field ?? 'name', input.newName)
  const current = yield* findPartByName(part, input.projectId, input.name)
  if (!current) throw notFound(`No ${part} named ${input.name} in this project`)
  if (input.newName === input.name) return 'unchanged'
  if ((yield* findPartByName(part, input.projectId, input.newName))) throw conflict('name_taken', `The project already has ${withArticle(part)} named ${input.newName}`)
  yield* renamePart(part, current.id, input.newName)
  yield* appendAdminLog(clock, {
    projectId: input.projectId, type: 'update', resource: part, actorId: input.actorId,
    previousValue: partValue(part, input.name), newValue: partValue(part, input.newName),
  })
  return 'updated'
}

/** What a team may do with a collection's records (default without a row: read and edit). */
export function* setCollectionPermission(
  clock: Clock,
  input: { projectId: number; collectionId: number; collectionName: string; teamId: number; teamName: string; read: boolean; edit: boolean; actorId: number | null },
): Op<Outcome> {
  const wanted = { canRead: input.read, canEdit: input.edit }
  const current = yield* findCollectionPermission(input.collectionId, input.teamId)
  if (current && current.canRead === wanted.canRead && current.canEdit === wanted.canEdit) return 'unchanged'
  yield* writeCollectionPermission({ collectionId: input.collectionId, teamId: input.teamId, ...wanted }, current !== undefined)
  const may = (p: { canRead: boolean; canEdit: boolean }) => (p.canEdit && p.canRead ? 'read and edit' : p.canRead ? 'read' : 'neither read nor edit')
  const value = (p: { canRead: boolean; canEdit: boolean }) => ({ name: `${input.collectionName}: team ${input.teamName} may ${may(p)}` })
  yield* appendAdminLog(clock, {
    projectId: input.projectId, type: 'update', resource: 'collection', actorId: input.actorId,
    previousValue: value(current ?? { canRead: true, canEdit: true }), newValue: value(wanted),
  })
  return current ? 'updated' : 'created'
}
