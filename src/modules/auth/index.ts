/** POST /auth/login (password → session cookie), POST /auth/logout, GET /v1/account (who am I), PATCH /v1/account (my choices). */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { clientAddressOf } from '../../http/client-address.ts'
import { errorResponses } from '../../http/errors.ts'
import { invalidField } from '../../lib/errors.ts'
import { refuseUnstorableText } from '../../http/storable-text.ts'
import { SESSION_COOKIE, sessionIdOf } from '../../lib/session-cookie.ts'
import { hashPassword, normalizeEmail, passwordProblem, userObject } from '../users/service.ts'
import { acceptInvitation, invitedUser } from '../users/invitations.ts'
import { Account, AcceptInvitationBody, LoginBody, Session, UpdateAccountBody } from './model.ts'
import { setTaskMail, wantsTaskMail } from '../mail/service.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { createSession, deleteSession, SESSION_TTL_MS } from './sessions.ts'
import { PasswordCheck } from './password-check.ts'
import { read } from '../../db/read.ts'

export function sessionCookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return [`${SESSION_COOKIE}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax', `Max-Age=${maxAgeSeconds}`, ...(secure ? ['Secure'] : [])].join('; ')
}

export function isHttps(deps: AppDeps, request: Request): boolean {
  return deps.config.baseUrl.startsWith('https://') || request.headers.get('x-forwarded-proto') === 'https'
}

export function authModule(deps: AppDeps) {
  /** The invitation acceptances under way, by link token (held for the request only). */
  const accepting = new Map<string, Promise<unknown>>()
  const passwords = new PasswordCheck(deps)
  const clientAddress = clientAddressOf(deps.config.trustProxy)
  return new Elysia({ name: 'auth-routes', tags: ['auth'] })
    .use(authPlugin(deps))
    .post(
      '/auth/login',
      async ({ body, request, set }) => {
        const user = await passwords.user({ email: normalizeEmail(body.email), address: clientAddress(request) }, body.password)
        const session = await write(deps.store, function* () {
          return yield* createSession(deps.clock, user.id, false)
        })
        set.headers['set-cookie'] = sessionCookie(session.id, SESSION_TTL_MS / 1000, isHttps(deps, request))
        return { user: userObject(user), expiresAt: new Date(session.expiresAt).toISOString() }
      },
      {
        beforeHandle: refuseUnstorableText,
        body: LoginBody,
        response: { 200: Session, ...errorResponses(401, 403, 429) },
        detail: {
          operationId: 'login',
          summary: 'Sign in with a password: sets the session cookie',
          description:
            'Failed attempts slow down after 3 and answer 429 after 10 within 15 minutes per email and client address; 429 after 50 per client address over all emails. ' +
            '503 server_busy (Retry-After) while too many sign-ins wait for their password check.',
        },
      },
    )
    .post(
      '/auth/invitation',
      async ({ body, request, set }) => {
        const problem = passwordProblem(body.password)
        // One acceptance of a link at a time in this process: those that come meanwhile wait for it, then find the
        // link spent and answer 404 without hashing a password (each hash holds a password worker ≈ 100 ms: a burst
        // of acceptances of one link would otherwise queue them past the connection's idle timeout). The database
        // still decides which acceptance spends the link, across instances.
        while (accepting.has(body.token)) await accepting.get(body.token)!.catch(() => {})
        const attempt = (async () => {
          // The link is checked before the slow hash, so a dead link answers at once.
          await read(deps.store, invitedUser(deps.clock, body.token))
          if (problem) throw invalidField('password', `password ${problem}`)
          const passwordHash = await hashPassword(body.password)
          return await write(deps.store, function* () {
            const invited = yield* acceptInvitation(deps.clock, body.token, passwordHash)
            return { user: invited, session: (yield* createSession(deps.clock, invited.id, false)) }
          })
        })()
        accepting.set(body.token, attempt)
        const { user, session } = await attempt.finally(() => {
          if (accepting.get(body.token) === attempt) accepting.delete(body.token)
        })
        set.headers['set-cookie'] = sessionCookie(session.id, SESSION_TTL_MS / 1000, isHttps(deps, request))
        return { user: userObject(user), expiresAt: new Date(session.expiresAt).toISOString() }
      },
      {
        sessionCall: true,
        body: AcceptInvitationBody,
        response: { 200: Session, ...errorResponses(400, 403, 404) },
        detail: {
          operationId: 'acceptInvitation',
          summary: 'Use a one-time invitation link: set your password and sign in (sets the session cookie)',
          description: 'The link works once, for 7 days, and only while it is the newest of its user; otherwise 404 invalid_invitation.',
        },
      },
    )
    .post(
      '/auth/logout',
      async ({ request, set }) => {
        const id = sessionIdOf(request)
        if (id) await write(deps.store, function* () {
          return yield* deleteSession(id)
        })
        set.headers['set-cookie'] = sessionCookie('', 0, isHttps(deps, request))
        set.status = 204
      },
      {
        sessionCall: true,
        response: { 204: t.Void(), ...errorResponses(403) },
        detail: { operationId: 'logout', summary: 'End the session and clear its cookie (403 cross_origin from another site)' },
      },
    )
    .get('/v1/account', async ({ caller }) => accountView(deps, caller, await read(deps.store, wantsTaskMail(caller.user.id))), {
      accountCall: true,
      response: { 200: Account },
      detail: { operationId: 'getAccount', summary: 'Who the caller is, and their own choices' },
    })
    .patch(
      '/v1/account',
      async ({ caller, body }) => {
        await write(deps.store, () => setTaskMail(caller.user.id, body.taskMail, deps.clock.now()))
        return accountView(deps, caller, body.taskMail)
      },
      {
        accountCall: true,
        body: UpdateAccountBody,
        response: { 200: Account, ...errorResponses(400) },
        detail: { operationId: 'updateAccount', summary: 'Change your own choices: task e-mail on or off' },
      },
    )
}

function accountView(deps: AppDeps, caller: AccountCaller, taskMail: boolean) {
  return { user: userObject(caller.user), viaSso: caller.viaSso, taskMail, mailEnabled: deps.mail !== null }
}
