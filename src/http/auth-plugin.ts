/**
 * The Elysia side of authentication: one named plugin whose macros every `/v1` route uses. The decision itself is
 * the app's `CallerAuth` (src/modules/auth/service.ts), built once in the composition root.
 * - `projectCall: { scope, role? }` — public API (Bearer token only), DESIGN §4 order; resolves `identity`.
 * - `accountCall: true` — management API: a console session cookie, or a Bearer token with `all` whose user is
 *   an admin of the token's project (then confined to that project); resolves `caller`.
 * - `userCall: true` — runs: a console session, or any live token of an active user (confined to its project;
 *   the route checks the scope it needs); resolves `caller`.
 * - `sessionCall: true` — logout: no caller needed, but a foreign Origin is refused as for every session change.
 * - `tokenCall: { holdsOverBudget }` — the MCP endpoint: a Bearer token only, naming no project; resolves `identity`,
 *   and `overBudget`: the 429 of a call `holdsOverBudget(body)` picks, left to the route to answer. Its 401 carries
 *   `WWW-Authenticate: Bearer` (MCP clients read the scheme from it).
 * All three authenticate in `transform`, before body and params validation; then, validated, a path parameter or body
 * field holding U+0000 or a lone surrogate is refused (./storable-text.ts).
 */
import { Elysia } from 'elysia'
import type { AccountCaller, CallerAuth, ProjectNeed, ProjectPlace, TokenCall, TokenIdentity } from '../lib/callers.ts'
import { HttpError } from '../lib/errors.ts'
import { BEARER, BEARER_OR_SESSION, errorResponseDocs } from './openapi.ts'
import { refuseUnstorableText } from './storable-text.ts'

/** The project a route's path names (`:projectName`), still raw: transform runs before params validation. */
function pathProject(params: unknown): string | undefined {
  return (params as Record<string, string | undefined> | undefined)?.projectName
}

/**
 * Where a route's path reaches a project's data (still raw): the project it names, or the run or task it is found from. A
 * route whose path reaches a project through another id adds that id here (test/project-access.test.ts enumerates
 * the routes and fails on one it cannot fill in).
 */
function pathPlace(params: unknown): ProjectPlace {
  const path = (params ?? {}) as Record<string, string | undefined>
  return { projectName: path.projectName ?? path.project, runId: path.runId, taskId: path.taskId }
}

/** Identities resolved in `transform`, read back in `resolve` (keyed by the request object, so never shared). */
const identities = new WeakMap<Request, TokenIdentity>()
const callers = new WeakMap<Request, AccountCaller>()
const tokenCalls = new WeakMap<Request, TokenCall>()

/**
 * The macro of a call by a session or a token (`accountCall`, `userCall`): `decide` names the caller of the path's
 * place, in `transform`; the handler gets it as `caller`.
 */
function callerCall(decide: (request: Request, headers: Record<string, unknown>, place: ProjectPlace) => Promise<AccountCaller>) {
  return (enabled: boolean) => ({
    detail: { security: BEARER_OR_SESSION, responses: errorResponseDocs(401, 403, 429) },
    transform: async ({ request, params, set }: { request: Request; params: unknown; set: { headers: Record<string, unknown> } }) => {
      if (enabled) callers.set(request, await decide(request, set.headers, pathPlace(params)))
    },
    beforeHandle: refuseUnstorableText,
    resolve: ({ request }: { request: Request }) => ({ caller: callers.get(request)! }),
  })
}

export function authPlugin({ auth }: { auth: CallerAuth }) {
  // Each macro also documents itself (/openapi.json): the scheme it accepts and the statuses its checks answer.
  return new Elysia({ name: 'auth' }).macro({
    // Authentication runs in `transform`, before body/params validation, so a caller without a valid token
    // learns nothing from validation messages; `resolve` then hands the identity to the handler.
    projectCall: (need: ProjectNeed) => ({
      detail: { security: BEARER, responses: errorResponseDocs(401, 403, 429) },
      transform: async ({ request, params, set }) => {
        identities.set(request, await auth.projectCaller(request, set.headers, pathProject(params) ?? '', need))
      },
      beforeHandle: refuseUnstorableText,
      resolve: ({ request }) => ({ identity: identities.get(request)! }),
    }),
    accountCall: callerCall((request, headers, place) => auth.accountCaller(request, headers, place)),
    /** A session call that needs no signed-in user (logout): only the Origin check. */
    sessionCall: (enabled: boolean) => ({
      transform: ({ request }) => {
        if (enabled) auth.refuseCrossOrigin(request)
      },
    }),
    tokenCall: (call: { holdsOverBudget(body: unknown): boolean }) => ({
      detail: { security: BEARER, responses: errorResponseDocs(401, 403, 429) },
      transform: async ({ request, body, set }) => {
        try {
          tokenCalls.set(request, await auth.tokenCaller(request, set.headers, call.holdsOverBudget(body)))
        } catch (error) {
          if (error instanceof HttpError && error.status === 401) error.headers['www-authenticate'] = 'Bearer'
          throw error
        }
      },
      resolve: ({ request }) => {
        const { identity, overBudget } = tokenCalls.get(request)!
        return { identity, overBudget }
      },
    }),
    userCall: callerCall((request, headers, place) => auth.userCaller(request, headers, place)),
  })
}
