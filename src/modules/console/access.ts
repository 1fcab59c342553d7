/** Who may see which console page: the same rules, through the same functions, as the API's. */
import type { AccountCaller } from '../../lib/callers.ts'
import { callerProject, requireProjectAdmin } from '../auth/service.ts'
import { forbidden, HttpError, notFound } from '../../lib/errors.ts'
import { canReachRendering, collectionAccess, findCollection, findTeam, requireEnvironment, roleIn } from '../directory/projects.ts'

/** The signed-in person, as the management API's checks know them. */
export type ConsoleUser = AccountCaller['user'] & { viaSso: boolean }

/** The signed-in person as a caller of the API's decisions (never a token). */
export const asCaller = (user: ConsoleUser): AccountCaller => ({ user, viaSso: user.viaSso, tokenProjectId: null, token: null })

/** The project, when the user is a member (404 otherwise, as the API: non-members learn nothing). */
export function* memberProject(user: ConsoleUser, name: string) {
  const project = yield* callerProject(asCaller(user), name)
  return { project, isAdmin: (yield* roleIn(project.id, user.id)) === 'admin' }
}

/** As memberProject, or null when the project access decision refuses it (an SSO project to a password session). */
export function* openableProject(user: ConsoleUser, name: string) {
  try {
    return yield* memberProject(user, name)
  } catch (error) {
    if (error instanceof HttpError && error.status === 403) return null
    throw error
  }
}

export function* adminProject(user: ConsoleUser, name: string) {
  return yield* requireProjectAdmin(asCaller(user), name)
}

export function* adminEnvironment(user: ConsoleUser, projectName: string, environmentName: string) {
  yield* adminProject(user, projectName)
  return yield* requireEnvironment(projectName, environmentName)
}

/** What one team sees in one environment: 404 for unknown names, 403 when the user cannot reach the team. */
export function* reachableRendering(user: ConsoleUser, params: Record<string, string>) {
  const { isAdmin } = yield* memberProject(user, params.project!)
  const { project, environment } = yield* requireEnvironment(params.project!, params.environment!)
  const team = yield* findTeam(project.id, params.team!)
  if (!team) throw notFound(`Team ${params.team} not found in project ${project.name}`)
  if (!(yield* canReachRendering({ userId: user.id, projectId: project.id, teamId: team.id }))) {
    throw forbidden(`You are not a member of team ${team.name}`, 'rendering_forbidden')
  }
  return { project, environment, team, isAdmin }
}

/** A collection as a team sees it: 403 without read permission. */
export function* readableCollection(user: ConsoleUser, params: Record<string, string>) {
  const rendering = yield* reachableRendering(user, params)
  const collection = yield* findCollection(rendering.project.id, params.collection!)
  if (!collection) throw notFound(`Collection ${params.collection} not found`)
  const access = yield* collectionAccess({ userId: user.id, projectId: rendering.project.id, teamId: rendering.team.id, collectionId: collection.id })
  if (!access.read) throw forbidden(`Team ${rendering.team.name} may not read ${collection.name}`, 'collection_forbidden')
  return { ...rendering, collection, access }
}
