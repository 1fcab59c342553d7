/**
 * Token management: the caller's own tokens (`/v1/account/tokens`) and a project's tokens for its admins
 * (`/v1/project/{p}/api-tokens`, the API access settings).
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { callerProject, requireProjectAdmin } from '../auth/service.ts'
import { errorResponses } from '../../http/errors.ts'
import { invalidField, notFound } from '../../lib/errors.ts'
import { parseIsoDateTime, toIso, toIsoOrNull } from '../../lib/time.ts'
import {
  createToken,
  expiryUnderMaker,
  findToken,
  listTokens,
  projectTokenView,
  resolveExpiry,
  resolveScopes,
  revokeToken,
  TokenInputError,
  tokenView,
} from './service.ts'
import { CreatedToken, CreateTokenBody, ProjectTokenList, TokenIdParams, TokenList } from './model.ts'
import { read } from '../../db/read.ts'

export function tokensModule(deps: AppDeps) {
  return new Elysia({ name: 'tokens', tags: ['tokens'] })
    .use(authPlugin(deps))
    .post(
      '/v1/account/tokens',
      async ({ body, caller, set }) => {
        const now = deps.clock.now()
        const name = body.name.trim()
        let scopes
        let expiresAt
        try {
          if (name === '') throw new TokenInputError('name', 'name must not be blank')
          scopes = resolveScopes(body.scopes, body.preset)
          const at = body.expiresAt === undefined ? undefined : parseIsoDateTime(body.expiresAt)
          if (at === null) throw new TokenInputError('expiresAt', `expiresAt is not an ISO 8601 date-time: "${body.expiresAt}"`)
          expiresAt = resolveExpiry(now, at, body.expiresInDays)
        } catch (error) {
          if (error instanceof TokenInputError) throw invalidField(error.field, error.message)
          throw error
        }
        const expiryField = body.expiresAt !== undefined ? 'expiresAt' : body.expiresInDays !== undefined ? 'expiresInDays' : null
        const created = await write(deps.store, function* () {
          // callerProject refuses an SSO project to a password session (403 sso_required).
          const project = yield* callerProject(caller, body.projectName)
          // A token made by a token never outlives it, and is revoked with it.
          const madeBy = caller.token?.tokenId ?? null
          return yield* createToken(deps.clock, {
            name,
            userId: caller.user.id,
            projectId: project.id,
            scopes: scopes!,
            expiresAt: madeBy === null ? (expiresAt ?? null) : yield* expiryUnderMaker(deps.clock, madeBy, expiresAt ?? null, expiryField),
            createdWithSso: caller.viaSso,
            actorId: caller.user.id,
            madeBy,
            maxLiveTokens: deps.config.liveTokensPerUser,
          })
        })
        set.status = 201
        return {
          id: created.token.id,
          name: created.token.name,
          token: created.value,
          prefix: created.token.prefix,
          projectName: body.projectName,
          scopes: JSON.parse(created.token.scopes) as string[],
          createdAt: toIso(created.token.createdAt),
          expiresAt: toIsoOrNull(created.token.expiresAt),
        }
      },
      {
        accountCall: true,
        body: CreateTokenBody,
        response: { 201: CreatedToken, ...errorResponses(400, 404, 409) },
        detail: {
          operationId: 'createToken',
          summary: 'Create a token for yourself on a project; the value is in this answer only',
          description:
            'A token made with a Bearer token expires no later than that token (none asked: its expiry; a later expiresAt or expiresInDays is 400 naming it) and is revoked with it. ' +
            'A user holds at most TRELLIS_LIVE_TOKENS_PER_USER live tokens (100 by default; neither revoked nor expired, over every project): one more is 409 `too_many_tokens`.',
        },
      },
    )
    .get(
      '/v1/account/tokens',
      async ({ caller }) => ({
        data: (await read(deps.store, listTokens({ userId: caller.user.id })))
          .filter((row) => caller.tokenProjectId === null || row.token.projectId === caller.tokenProjectId)
          .map(tokenView),
      }),
      {
        accountCall: true,
        response: { 200: TokenList },
        detail: { operationId: 'listMyTokens', summary: 'Your live tokens (a token caller sees those of its project)' },
      },
    )
    .delete(
      '/v1/account/tokens/:id',
      async ({ params, caller, set }) => {
        await write(deps.store, function* () {
          const token = yield* findToken(Number(params.id))
          const visible = token && token.userId === caller.user.id && token.revokedAt === null
          if (!visible || (caller.tokenProjectId !== null && token.projectId !== caller.tokenProjectId)) {
            throw notFound(`Token ${params.id} not found`)
          }
          yield* revokeToken(deps.clock, token, caller.user.id)
        })
        set.status = 204
      },
      {
        accountCall: true,
        params: TokenIdParams,
        response: { 204: t.Void(), ...errorResponses(400, 404) },
        detail: { operationId: 'revokeMyToken', summary: 'Revoke one of your tokens: its next call gets 401' },
      },
    )
    .get(
      '/v1/project/:projectName/api-tokens',
      async ({ params, caller }) => {
        const project = await read(deps.store, requireProjectAdmin(caller, params.projectName))
        return { data: (await read(deps.store, listTokens({ projectId: project.id }))).map(projectTokenView) }
      },
      {
        accountCall: true,
        response: { 200: ProjectTokenList, ...errorResponses(404) },
        detail: { operationId: 'listProjectTokens', summary: "Every live token of a project, with its owner (project admins)" },
      },
    )
    .delete(
      '/v1/project/:projectName/api-tokens/:id',
      async ({ params, caller, set }) => {
        await write(deps.store, function* () {
          const project = yield* requireProjectAdmin(caller, params.projectName)
          const token = yield* findToken(Number(params.id))
          if (!token || token.projectId !== project.id || token.revokedAt !== null) throw notFound(`Token ${params.id} not found`)
          yield* revokeToken(deps.clock, token, caller.user.id)
        })
        set.status = 204
      },
      {
        accountCall: true,
        params: t.Object({ projectName: t.String(), id: TokenIdParams.properties.id }),
        response: { 204: t.Void(), ...errorResponses(400, 404) },
        detail: { operationId: 'revokeProjectToken', summary: "Revoke any token of a project (project admins)" },
      },
    )
}
