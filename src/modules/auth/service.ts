/**
 * The one authentication decision (DESIGN §4). Bearer tokens, in this order: token (401) → user active (403) →
 * token's project is the addressed project (403) → SSO (403) → scope (403) → role (403). Project/environment
 * existence (404) is checked by the route afterwards, so nothing about a project is revealed before the token is
 * accepted. Everything is decided at request time, on what the database holds then (the token lookup is cached per
 * connection or instance and emptied by any change it depends on, src/db/lookup-cache.ts) — a revocation, expiry, deactivation
 * or demotion, even made by another process, applies to the very next request. Every route family (the auth plugin's macros, the webhook, runs)
 * calls `authorizeToken`; console sessions are read here too (`sessionOf`).
 */
import { timingSafeEqual } from 'node:crypto'
import { findTokenByHash, touchTokenLastUsed } from '../../db/auth-queries.ts'
import type { Store } from '../../db/store.ts'
import { tryWrite } from '../../db/write.ts'
import type { AccountCaller, CallerAuth, ProjectNeed, ProjectPlace, TokenCall, TokenIdentity } from '../../lib/callers.ts'
import { bearerValue } from '../../lib/callers.ts'
import { forbidden, HttpError, notFound, unauthorized } from '../../lib/errors.ts'
import type { TokenRateLimiter } from '../../lib/rate-limit.ts'
import { refuseCrossOrigin, sessionIdOf } from '../../lib/session-cookie.ts'
import { hasScope } from '../../lib/access.ts'
import type { Clock } from '../../lib/clock.ts'
import { findProjectByName, isAdminOf, isMemberOf, type Project, requireProject } from '../directory/projects.ts'
import { findRunWithWorkflow } from '../../db/runs.ts'
import { findTask } from '../../db/tasks.ts'
import { someHoldUnstorableText } from '../../lib/storable-text.ts'
import { hashTokenValue, looksLikeToken } from '../../lib/token-value.ts'
import { findSession } from './sessions.ts'
import type { Op } from '../../db/op.ts'
import { read } from '../../db/read.ts'

/** How often `lastUsedAt` may be written per token: never a write per request. */
export const LAST_USED_RESOLUTION_MS = 60_000

/** Tokens whose stamp this process last tried to write are remembered up to this many (then forgotten at once). */
const MAX_STAMPS_TRACKED = 100_000

export class TokenAuthenticator {
  /**
   * When this process last stamped (or tried to stamp) each token: the row may come from the lookup cache with an
   * older `lastUsedAt`, and a stamp is still written at most once per LAST_USED_RESOLUTION_MS.
   */
  private readonly stamped = new Map<number, number>()

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  /** 401 unless the header carries a known, live token. */
  async authenticate(authorization: string | null | undefined): Promise<TokenIdentity> {
    const value = bearerValue(authorization)
    if (value === null) throw unauthorized('Missing or malformed Authorization header; expected "Bearer <token>"')
    if (!looksLikeToken(value)) throw unauthorized('Invalid token')
    const hash = hashTokenValue(value)
    const row = await read(this.store, findTokenByHash(hash))
    // The index finds the row by hash; compare again in constant time so equality never short-circuits.
    if (!row || !timingSafeEqual(Buffer.from(row.tokenHash), Buffer.from(hash))) throw unauthorized('Invalid token')
    const now = this.clock.now()
    if (row.revokedAt !== null) throw unauthorized('Token has been revoked')
    if (row.expiresAt !== null && row.expiresAt <= now) throw unauthorized('Token has expired')
    const lastStamp = Math.max(row.lastUsedAt ?? -Infinity, this.stamped.get(row.tokenId) ?? -Infinity)
    if (lastStamp <= now - LAST_USED_RESOLUTION_MS) {
      if (this.stamped.size >= MAX_STAMPS_TRACKED) this.stamped.clear()
      this.stamped.set(row.tokenId, now)
      // Never a reason to refuse or delay a call: while the database is locked or full, the stamp waits for a later one.
      tryWrite(this.store, () => touchTokenLastUsed(row.tokenId, now, now - LAST_USED_RESOLUTION_MS))
    }
    return {
      tokenId: row.tokenId,
      userId: row.userId,
      user: { id: row.userId, email: row.email, username: row.username, disabledAt: row.disabledAt },
      projectId: row.projectId,
      projectName: row.projectName,
      projectSso: row.projectSso,
      scopes: JSON.parse(row.scopes) as string[],
      createdWithSso: row.createdWithSso,
      role: row.role,
    }
  }
}

/**
 * The 403 checks of a token's call, in DESIGN §4's order: user active → the token's project is the addressed one
 * (by name from a path, by id from a webhook's target; undefined when the call names none) → SSO → scope → role.
 * Names are compared before the project is looked up, so a token of another project gets the same answer whether
 * the project exists or not (and learns nothing of it).
 */
export function authorizeToken(identity: TokenIdentity, project: string | number | undefined, need?: ProjectNeed): void {
  if (identity.user.disabledAt !== null) throw forbidden('User is not authorized for the organization', 'user_deactivated')
  if (project !== undefined && (typeof project === 'string' ? identity.projectName : identity.projectId) !== project) {
    throw forbidden('Token is not valid for this project', 'wrong_project')
  }
  if (identity.projectSso && !identity.createdWithSso) {
    throw forbidden('This project uses SSO: the token must be generated while logged in with SSO', 'sso_required')
  }
  if (need === undefined) return
  if (!hasScope(identity.scopes, need.scope)) throw forbidden(`Token lacks the ${need.scope} scope`, 'insufficient_scope')
  if (need.role && identity.role !== need.role) {
    throw forbidden(`The token's user must have the ${need.role} role on the project`, 'insufficient_role')
  }
}

/** The signed-in console user of this request (the session cookie), or null. */
export function* sessionOf(clock: Clock, request: Request) {
  return yield* findSession(clock, sessionIdOf(request))
}

/** The app's `CallerAuth`: built once per app (composition root), it holds the token lookup and the API rate limiter. */
export class CallerAuthenticator implements CallerAuth {
  private readonly baseOrigin: string

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    readonly tokens: TokenAuthenticator,
    private readonly limiter: TokenRateLimiter,
    baseUrl: string,
  ) {
    this.baseOrigin = new URL(baseUrl).origin
  }

  /**
   * The token of a public API call; every authenticated call counts against its rate limit, whatever its outcome
   * (`headers` null: a check of a call already counted, `confirmCaller`).
   */
  private async token(request: Request, headers: Record<string, unknown> | null, holdOverBudget?: (refusal: HttpError) => void): Promise<TokenIdentity> {
    const identity = await this.tokens.authenticate(request.headers.get('authorization'))
    if (headers === null) return identity
    // A token's calls count against its one API rate limit wherever they go (DESIGN §6); sessions are people.
    // In memory (SQLite) the answer is here already: no await, no extra turn of the event loop on the hot path.
    try {
      const decided = this.limiter.enforce(identity.tokenId)
      Object.assign(headers, decided instanceof Promise ? await decided : decided)
    } catch (error) {
      if (holdOverBudget === undefined || !(error instanceof HttpError && error.status === 429)) throw error
      holdOverBudget(error)
    }
    return identity
  }

  async projectCaller(request: Request, headers: Record<string, unknown>, projectName: string, need: ProjectNeed): Promise<TokenIdentity> {
    const identity = await this.token(request, headers)
    authorizeToken(identity, projectName, need)
    return identity
  }

  async confirmCaller(request: Request, place: ProjectPlace): Promise<AccountCaller> {
    return this.userCaller(request, null, place)
  }

  async tokenCaller(request: Request, headers: Record<string, unknown>, holdOverBudget: boolean): Promise<TokenCall> {
    let overBudget: HttpError | null = null
    const identity = await this.token(request, headers, holdOverBudget ? (refusal) => (overBudget = refusal) : undefined)
    authorizeToken(identity, undefined)
    return { identity, overBudget }
  }

  async userCaller(request: Request, headers: Record<string, unknown> | null, place: ProjectPlace): Promise<AccountCaller> {
    if (request.headers.get('authorization')) {
      // A token carries its project's SSO rule and membership (authorizeToken); a run of another project is the route's 404.
      const identity = await this.token(request, headers)
      authorizeToken(identity, place.projectName)
      return tokenAccountCaller(identity)
    }
    const session = await read(this.store, sessionOf(this.clock, request))
    if (!session) throw unauthorized('Sign in, or send a Bearer token')
    this.refuseCrossOrigin(request)
    const caller: AccountCaller = { user: session.user, viaSso: session.viaSso, tokenProjectId: null, token: null }
    if (place.projectName !== undefined || place.runId !== undefined || place.taskId !== undefined) await read(this.store, requirePlaceAccess(caller, place))
    return caller
  }

  async accountCaller(request: Request, headers: Record<string, unknown>, place: ProjectPlace): Promise<AccountCaller> {
    const caller = await this.userCaller(request, headers, place)
    if (caller.token && (!hasScope(caller.token.scopes, 'all') || caller.token.role !== 'admin')) {
      throw forbidden('Management with a token needs the all scope and the admin role on its project', 'insufficient_scope')
    }
    return caller
  }

  refuseCrossOrigin(request: Request): void {
    refuseCrossOrigin(request, this.baseOrigin)
  }
}

/** A token's call as an account caller: its user, confined to its project (never an instance administrator). */
export function tokenAccountCaller(identity: TokenIdentity): AccountCaller {
  return { user: { ...identity.user, isInstanceAdmin: false }, viaSso: identity.createdWithSso, tokenProjectId: identity.projectId, token: identity }
}

/** 403 insufficient_scope when a token caller lacks `scope` (a session acts with its user's rights). */
export function requireCallerScope(caller: AccountCaller, scope: ProjectNeed['scope']): void {
  if (caller.token) authorizeToken(caller.token, undefined, { scope })
}

/**
 * The project a management caller addresses: a Bearer caller naming another project than its token's is 403
 * wrong_project (before any lookup, as on every project route); then `requireProjectAccess`.
 */
export function* callerProject(caller: AccountCaller, name: string): Op<Project> {
  if (caller.token) authorizeToken(caller.token, name)
  const project = yield* requireProject(name)
  yield* requireProjectAccess(caller, project)
  return project
}

/**
 * The one decision whether a caller may reach a project's data, taken alike by the routes that name the project and
 * by those that find it from an id (a run, its events and callbacks, the console's run page): a token only within
 * its own project and a member only (404 otherwise, `hidden`: non-members learn nothing, not even the project's
 * name), and on an SSO project only a session signed in with SSO or a token generated in one (403 sso_required).
 */
export function* requireProjectAccess(
  caller: AccountCaller,
  project: Pick<Project, 'id' | 'name' | 'sso'>,
  hidden: () => HttpError = () => notFound(`Project ${project.name} not found`),
): Op<void> {
  if (caller.tokenProjectId !== null && caller.tokenProjectId !== project.id) throw hidden()
  if (!(yield* isMemberOf(caller.user.id, project.id))) throw hidden()
  refuseWithoutSso(caller, project)
}

/**
 * A session's call to a route whose path reaches a project's data: the project access decision for that project, taken
 * before the route reads its input (a caller refused learns nothing from validation either). An unknown project or run,
 * or a path value no row can hold, is left to the route (its 404 or 400). An instance administrator manages projects
 * they are not a member of (`requireProjectManager`): for them only the SSO rule is taken here.
 */
export function* requirePlaceAccess(caller: AccountCaller, place: ProjectPlace): Op<void> {
  if (someHoldUnstorableText(place)) return
  if (place.runId !== undefined) {
    const found = yield* findRunWithWorkflow(place.runId)
    if (found) yield* requireProjectAccessOrManage(caller, found.project, () => notFound(`Run ${place.runId} not found`))
    return
  }
  if (place.taskId !== undefined) {
    const found = yield* findTask(place.taskId)
    if (found) yield* requireProjectAccessOrManage(caller, found.project, () => notFound(`Task ${place.taskId} not found`))
    return
  }
  const project = yield* findProjectByName(place.projectName!)
  if (project) yield* requireProjectAccessOrManage(caller, project)
}

function* requireProjectAccessOrManage(caller: AccountCaller, project: Pick<Project, 'id' | 'name' | 'sso'>, hidden?: () => HttpError): Op<void> {
  if (caller.user.isInstanceAdmin && caller.token === null && !(yield* isMemberOf(caller.user.id, project.id))) refuseWithoutSso(caller, project)
  else yield* requireProjectAccess(caller, project, hidden)
}

/** 403 sso_required on an SSO project unless the session was signed in with SSO (or the token generated in one). */
function refuseWithoutSso(caller: AccountCaller, project: Pick<Project, 'sso'>): void {
  if (project.sso && !caller.viaSso) {
    throw forbidden('This project uses SSO: sign in with SSO to use it (its tokens must be generated while logged in with SSO)', 'sso_required')
  }
}

/** As callerProject, and the caller must hold the admin role on it now. */
export function* requireProjectAdmin(caller: AccountCaller, name: string): Op<Project> {
  const project = yield* callerProject(caller, name)
  if (!(yield* isAdminOf(caller.user.id, project.id))) throw forbidden('Only project admins may do this', 'insufficient_role')
  return project
}

/**
 * 403 `instance_admin_required` unless the caller is an instance administrator signed in to the console (a token
 * is confined to its project and never acts for the instance). Read at request time, like every right.
 */
export function requireInstanceAdmin(caller: AccountCaller): void {
  if (caller.token !== null || !caller.user.isInstanceAdmin) {
    throw forbidden('Only instance administrators, signed in to the console, may do this', 'instance_admin_required')
  }
}

/**
 * The project whose structure and people the caller may change: any project for an instance administrator's
 * session, else as requireProjectAdmin. An SSO project still needs an SSO session (or a token made in one).
 */
export function* requireProjectManager(caller: AccountCaller, name: string): Op<Project> {
  const { project, manager } = yield* callerProjectRole(caller, name)
  if (!manager) throw forbidden('Only project admins may do this', 'insufficient_role')
  return project
}

/**
 * The project as requireProjectManager finds it, with whether the caller manages it: for the routes whose own rule
 * also lets a member who is no admin act (a record written through a team that may edit its collection).
 */
export function* callerProjectRole(caller: AccountCaller, name: string): Op<{ project: Project; manager: boolean }> {
  if (caller.token === null && caller.user.isInstanceAdmin) {
    const project = yield* requireProject(name)
    refuseWithoutSso(caller, project)
    return { project, manager: true }
  }
  const project = yield* callerProject(caller, name)
  return { project, manager: yield* isAdminOf(caller.user.id, project.id) }
}
