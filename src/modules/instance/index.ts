/**
 * The instance administrators' routes: the people of the instance (create — with a password or a one-time
 * invitation link —, rename, grant or revoke instance administration, deactivate, reactivate, invite again) and new
 * projects. With an SMTP server configured, an invitation link is also e-mailed to the person (docs/mail.md). Session of an instance administrator only (403 `instance_admin_required` otherwise). The changes go
 * through the same service functions as the CLI and `trellis apply`, with the same admin log entries.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { requireInstanceAdmin } from '../auth/service.ts'
import { errorResponses } from '../../http/errors.ts'
import { invalidField } from '../../lib/errors.ts'
import { queueInvitationMail } from '../mail/service.ts'
import { toIso } from '../../lib/time.ts'
import { setProjectMember, setUserDeactivated } from '../members/service.ts'
import { createProject } from '../projects/structure.ts'
import { ProjectView } from '../projects/admin-model.ts'
import { createInvitation, invitationUrl } from '../users/invitations.ts'
import { createUser, findUser, hashPassword, holdInstanceAdminRule, requireUser, listUsers, passwordProblem, setInstanceAdmin, setUsername, type User } from '../users/service.ts'
import { instanceUserView } from '../directory/users.ts'
import { CreatedUser, CreateProjectBody, CreateUserBody, Invitation, InstanceUser, OutboundAllow, OutboundAllowBody, UpdateUserBody, UserIdParams } from './model.ts'
import { ALLOW_LIST_STALE_MS, outboundAllowView, setOutboundAllow } from './outbound-allow.ts'
import { t } from 'elysia'
import { read } from '../../db/read.ts'

/** A new invitation: its link (shown once in the answer) and, when mail is sent, the same link e-mailed to the person. */
function* invite(deps: AppDeps, user: User, actorId: number) {
  const { token, expiresAt } = yield* createInvitation(deps.clock, { user, actorId })
  const invitation = { url: invitationUrl(deps.config.baseUrl, token), expiresAt: toIso(expiresAt) }
  const messageId = yield* queueInvitationMail(deps.mail, deps.clock.now(), { to: user.email, ...invitation })
  return { ...invitation, emailed: messageId !== null }
}

export function instanceModule(deps: AppDeps) {
  return new Elysia({ name: 'instance', tags: ['instance-administration'] })
    .use(authPlugin(deps))
    .get(
      '/v1/instance/users',
      async ({ caller }) => {
        requireInstanceAdmin(caller)
        return { data: (await read(deps.store, listUsers())).map(instanceUserView) }
      },
      {
        accountCall: true,
        response: { 200: t.Object({ data: t.Array(InstanceUser) }) },
        detail: { operationId: 'listInstanceUsers', summary: 'Every user of the instance (instance administrators)' },
      },
    )
    .post(
      '/v1/instance/users',
      async ({ body, caller, set }) => {
        requireInstanceAdmin(caller)
        if (body.password !== undefined) {
          const problem = passwordProblem(body.password)
          if (problem) throw invalidField('password', `password ${problem}`)
        }
        // Hashing is slow: before the write lock.
        const passwordHash = body.password === undefined ? null : await hashPassword(body.password)
        const created = await write(deps.store, function* () {
          const user = yield* createUser(deps.clock, {
            email: body.email, username: body.username, passwordHash, isInstanceAdmin: body.instanceAdmin, actorId: caller.user.id,
          })
          return { user, invitation: passwordHash === null ? (yield* invite(deps, user, caller.user.id)) : undefined }
        })
        set.status = 201
        return { user: instanceUserView(created.user), ...(created.invitation ? { invitation: created.invitation } : {}) }
      },
      {
        accountCall: true,
        body: CreateUserBody,
        response: { 201: CreatedUser, ...errorResponses(400, 409) },
        detail: {
          operationId: 'createInstanceUser',
          summary: 'Create a user: with a password, or (without) a one-time invitation link in this answer only',
        },
      },
    )
    .put(
      '/v1/instance/users/:id',
      async ({ params, body, caller }) => {
        requireInstanceAdmin(caller)
        const user = await write(deps.store, function* () {
          const actorId = caller.user.id
          // A revocation or deactivation locks the instance administrators' rule before anything else (the rename's log entry).
          if (body.instanceAdmin === false || body.deactivated === true) yield* holdInstanceAdminRule()
          let current = yield* requireUser(params.id)
          yield* setUsername(deps.clock, current, body.username, actorId)
          // Grant before deactivating, revoke after reactivating: each step is checked against the last-admin rule.
          if (body.instanceAdmin === true) yield* setInstanceAdmin(deps.clock, current, true, actorId)
          if (body.deactivated !== undefined) yield* setUserDeactivated(deps.clock, current.id, body.deactivated, actorId)
          current = (yield* findUser(current.id))!
          if (body.instanceAdmin === false) yield* setInstanceAdmin(deps.clock, current, false, actorId)
          return (yield* findUser(current.id))!
        })
        return instanceUserView(user)
      },
      {
        accountCall: true,
        params: UserIdParams,
        body: UpdateUserBody,
        response: { 200: InstanceUser, ...errorResponses(400, 404, 409) },
        detail: {
          operationId: 'updateInstanceUser',
          summary: 'Rename, grant or revoke instance administration, deactivate or reactivate a user (never the last instance administrator)',
        },
      },
    )
    .post(
      '/v1/instance/users/:id/invitation',
      async ({ params, caller, set }) => {
        requireInstanceAdmin(caller)
        const invitation = await write(deps.store, function* () {
          return yield* invite(deps, (yield* requireUser(params.id)), caller.user.id)
        })
        set.status = 201
        return invitation
      },
      {
        accountCall: true,
        params: UserIdParams,
        response: { 201: Invitation, ...errorResponses(400, 404, 409) },
        detail: {
          operationId: 'inviteInstanceUser',
          summary: 'A new one-time invitation link for a user (older links stop working); in this answer only',
        },
      },
    )
    .get(
      '/v1/instance/outbound-allow',
      async ({ caller }) => {
        requireInstanceAdmin(caller)
        return read(deps.store, outboundAllowView(deps.config))
      },
      {
        accountCall: true,
        response: { 200: OutboundAllow },
        detail: { operationId: 'getOutboundAllow', summary: 'The outbound allow-list: local and private hosts and ranges `http` steps and callbacks may reach (instance administrators)' },
      },
    )
    .put(
      '/v1/instance/outbound-allow',
      async ({ body, caller }) => {
        requireInstanceAdmin(caller)
        const view = await write(deps.store, () => setOutboundAllow(deps.clock, deps.config, body.entries, caller.user.id))
        deps.outboundAllow.forget()
        return view
      },
      {
        accountCall: true,
        body: OutboundAllowBody,
        response: { 200: OutboundAllow, ...errorResponses(400, 409) },
        detail: {
          operationId: 'setOutboundAllow',
          summary: 'Replace the outbound allow-list kept in the console, with an instance admin log entry (instance administrators)',
          description:
            'Each entry is a host name, an IP address or a CIDR range, read as TRELLIS_HTTP_ALLOW reads its entries; a bad one is a 400 naming `entries[i]`. ' +
            'In effect at once on this instance, and on other instances of a PostgreSQL deployment within ' +
            `${ALLOW_LIST_STALE_MS / 1000} s; no restart. 409 \`allow_list_set_by_environment\` while TRELLIS_HTTP_ALLOW is set (it is the list then).`,
        },
      },
    )
    .post(
      '/v1/projects',
      async ({ body, caller, set }) => {
        requireInstanceAdmin(caller)
        const project = await write(deps.store, function* () {
          const created = yield* createProject(deps.clock, { name: body.name, sso: body.sso, actorId: caller.user.id })
          // Its creator is its first admin, so the project can be opened and used at once.
          yield* setProjectMember(deps.clock, { projectId: created.id, userId: caller.user.id, role: 'admin', actorId: caller.user.id })
          return created
        })
        set.status = 201
        return { name: project.name, sso: project.sso }
      },
      {
        accountCall: true,
        body: CreateProjectBody,
        response: { 201: ProjectView, ...errorResponses(400, 409) },
        detail: { operationId: 'createProject', summary: 'Create a project; its creator becomes its first admin (instance administrators)' },
      },
    )
}
