/**
 * The Elysia side of authentication: one named plugin whose macros every `/v1` route uses.
 * - `projectCall: { scope, role? }` — public API (Bearer token only), DESIGN §4 order; resolves `identity`.
 * - `accountCall: true` — management API: a console session cookie, or a Bearer token with `all` whose user is
 *   an admin of the token's project (then confined to that project); resolves `caller`.
 * - `userCall: true` — runs: a console session, or any live token of an active user (confined to its project;
 *   the route checks the scope it needs); resolves `caller`.
 * - `sessionCall: true` — logout: no caller needed, but a foreign Origin is refused as for every session change.
 * All three authenticate in `transform`, before body and params validation.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../app.ts'
import { findSession, SESSION_COOKIE, type SessionUser } from '../modules/auth/sessions.ts'
import type { Db } from '../db/open.ts'
import { type Project, requireProject } from '../modules/projects/service.ts'
import { hasScope, isAdminOf, isMemberOf } from '../modules/tokens/service.ts'
import {
  authorizeProjectCall,
  type ProjectNeed,
  requireActiveUser,
  requireSsoWhenNeeded,
  requireTokenProject,
  type TokenIdentity,
  TokenAuthenticator,
} from './auth.ts'
import { forbidden, notFound, unauthorized } from './errors.ts'
import { BEARER, BEARER_OR_SESSION, errorResponseDocs } from './openapi.ts'
import { TokenRateLimiter } from './rate-limit.ts'

export interface AccountCaller {
  user: Pick<SessionUser, 'id' | 'email' | 'username' | 'isInstanceAdmin'>
  /** Logged in through SSO (tokens created now get `createdWithSso`). */
  viaSso: boolean
  /** Set when the caller is a Bearer token: management is confined to that token's project. */
  tokenProjectId: number | null
  token: TokenIdentity | null
}

/** Reads one cookie from the Cookie header (no signing: the value is a random id looked up by hash). */
export function readCookie(header: string | null, name: string): string | undefined {
  if (!header) return undefined
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

/**
 * Defence in depth against cross-site requests riding the session cookie (SameSite=Lax and JSON-only bodies
 * already stop them): a browser's `Origin`, when sent, must be this server's — the Host it was asked for, or the
 * configured base URL (behind a proxy that rewrites Host).
 */
function sameOrigin(request: Request, baseOrigin: string): boolean {
  const origin = request.headers.get('origin')
  if (origin === null) return true
  let host: string
  try {
    host = new URL(origin).host
  } catch {
    return false
  }
  return host === request.headers.get('host') || host === new URL(request.url).host || origin === baseOrigin
}

/** The project a route's path names (`:projectName`), still raw: transform runs before params validation. */
function pathProject(params: unknown): string | undefined {
  return (params as Record<string, string | undefined> | undefined)?.projectName
}

/** Identities resolved in `transform`, read back in `resolve` (keyed by the request object, so never shared). */
const identities = new WeakMap<Request, TokenIdentity>()
const callers = new WeakMap<Request, AccountCaller>()

/** One authenticator and one rate limiter per app, however many modules use the plugin. */
const shared = new WeakMap<AppDeps, { tokens: TokenAuthenticator; limiter: TokenRateLimiter }>()

/** The app's token authenticator and API rate limiter (the webhook route authenticates by hand, in its own order). */
export function sharedFor(deps: AppDeps) {
  let value = shared.get(deps)
  if (!value) {
    value = {
      tokens: new TokenAuthenticator(deps.store, deps.clock),
      limiter: new TokenRateLimiter(deps.clock, {
        perMinute: deps.config.apiRatePerMinute,
        perHour: deps.config.apiRatePerHour,
        perDay: deps.config.apiRatePerDay,
      }),
    }
    shared.set(deps, value)
  }
  return value
}

export function authPlugin(deps: AppDeps) {
  const { tokens, limiter } = sharedFor(deps)
  const baseOrigin = new URL(deps.config.baseUrl).origin
  /** The one Origin check of every change made with the session cookie (403 cross_origin). */
  const refuseCrossOrigin = (request: Request): void => {
    if (request.method !== 'GET' && !sameOrigin(request, baseOrigin)) {
      throw forbidden('A change made with the session must come from a Trellis page', 'cross_origin')
    }
  }

  /**
   * A console session, or any live Bearer token of an active user (then confined to the token's project: a path
   * naming another project is 403 wrong_project here, in DESIGN §4's order, before anything is looked up).
   */
  const userCaller = (request: Request, headers: Record<string, unknown>, projectName: string | undefined): AccountCaller => {
    const authorization = request.headers.get('authorization')
    if (authorization) {
      const identity = tokens.authenticate(authorization)
      // A token's calls count against its one API rate limit wherever they go (DESIGN §6); sessions are people.
      Object.assign(headers, limiter.enforce(identity.tokenId))
      requireActiveUser(identity)
      if (projectName !== undefined) requireTokenProject(identity, projectName)
      requireSsoWhenNeeded(identity)
      return {
        user: { ...identity.user, isInstanceAdmin: false },
        viaSso: identity.createdWithSso,
        tokenProjectId: identity.projectId,
        token: identity,
      }
    }
    const session = findSession(deps.store.db, deps.clock, readCookie(request.headers.get('cookie'), SESSION_COOKIE))
    if (!session) throw unauthorized('Sign in, or send a Bearer token')
    refuseCrossOrigin(request)
    return { user: session.user, viaSso: session.viaSso, tokenProjectId: null, token: null }
  }

  /** Management: a session, or a token with `all` whose user is an admin of its project. */
  const accountCaller = (request: Request, headers: Record<string, unknown>, projectName: string | undefined): AccountCaller => {
    const caller = userCaller(request, headers, projectName)
    if (caller.token && (!hasScope(caller.token.scopes, 'all') || caller.token.role !== 'admin')) {
      throw forbidden('Management with a token needs the all scope and the admin role on its project', 'insufficient_scope')
    }
    return caller
  }

  // Each macro also documents itself (/openapi.json): the scheme it accepts and the statuses its checks answer.
  return new Elysia({ name: 'auth' }).macro({
    // Authentication runs in `transform`, before body/params validation, so a caller without a valid token
    // learns nothing from validation messages; `resolve` then hands the identity to the handler.
    projectCall: (need: ProjectNeed) => ({
      detail: { security: BEARER, responses: errorResponseDocs(401, 403, 429) },
      transform: ({ request, params, set }) => {
        const identity = tokens.authenticate(request.headers.get('authorization'))
        // Every authenticated public API call counts, whatever its outcome, and carries the headers.
        Object.assign(set.headers, limiter.enforce(identity.tokenId))
        authorizeProjectCall(identity, pathProject(params) ?? '', need)
        identities.set(request, identity)
      },
      resolve: ({ request }) => ({ identity: identities.get(request)! }),
    }),
    accountCall: (enabled: boolean) => ({
      detail: { security: BEARER_OR_SESSION, responses: errorResponseDocs(401, 403, 429) },
      transform: ({ request, params, set }) => {
        if (enabled) callers.set(request, accountCaller(request, set.headers, pathProject(params)))
      },
      resolve: ({ request }) => ({ caller: callers.get(request)! }),
    }),
    /** A session call that needs no signed-in user (logout): only the Origin check. */
    sessionCall: (enabled: boolean) => ({
      transform: ({ request }) => {
        if (enabled) refuseCrossOrigin(request)
      },
    }),
    userCall: (enabled: boolean) => ({
      detail: { security: BEARER_OR_SESSION, responses: errorResponseDocs(401, 403, 429) },
      transform: ({ request, params, set }) => {
        if (enabled) callers.set(request, userCaller(request, set.headers, pathProject(params)))
      },
      resolve: ({ request }) => ({ caller: callers.get(request)! }),
    }),
  })
}

/**
 * The project a management caller addresses: a Bearer caller naming another project than its token's is 403
 * wrong_project (before any lookup, as on every project route); otherwise 404 when unknown or when the caller is
 * not a member (members of other projects learn nothing about it); an SSO project only for a session signed in
 * with SSO (or a token generated in one).
 */
export function callerProject(db: Db, caller: AccountCaller, name: string): Project {
  if (caller.token) requireTokenProject(caller.token, name)
  const project = requireProject(db, name)
  if (!isMemberOf(db, caller.user.id, project.id)) throw notFound(`Project ${name} not found`)
  if (project.sso && !caller.viaSso) {
    throw forbidden('This project uses SSO: sign in with SSO to use it (its tokens must be generated while logged in with SSO)', 'sso_required')
  }
  return project
}

/** As callerProject, and the caller must hold the admin role on it now. */
export function requireProjectAdmin(db: Db, caller: AccountCaller, name: string): Project {
  const project = callerProject(db, caller, name)
  if (!isAdminOf(db, caller.user.id, project.id)) throw forbidden('Only project admins may do this', 'insufficient_role')
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
export function requireProjectManager(db: Db, caller: AccountCaller, name: string): Project {
  if (caller.token !== null || !caller.user.isInstanceAdmin) return requireProjectAdmin(db, caller, name)
  const project = requireProject(db, name)
  if (project.sso && !caller.viaSso) {
    throw forbidden('This project uses SSO: sign in with SSO to change it', 'sso_required')
  }
  return project
}
