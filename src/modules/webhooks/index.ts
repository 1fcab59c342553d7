/**
 * `POST {webhook_url}` with DESIGN §8's eight checks in order, and the trigger settings endpoints under a
 * workflow for project admins.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import type { ProjectNeed } from '../../lib/callers.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { parseJsonText } from '../../http/body.ts'
import { errorResponses } from '../../http/errors.ts'
import { badRequest, forbidden, notFound, tooManyRequests } from '../../lib/errors.ts'
import { BEARER } from '../../http/openapi.ts'
import { authorizeToken, requireProjectAdmin } from '../auth/service.ts'
import { canReachRendering } from '../directory/projects.ts'
import { idempotencyScope, idempotentCall, replayedRunId, startRunOnce } from '../runs/idempotency.ts'
import { idempotencyDocs, idempotencyKeyOf, runAccepted } from '../../http/idempotency-key.ts'
import { findTriggerTarget, requireWorkflow, webhookSettings } from '../workflows/service.ts'
import { RunAccepted } from '../runs/model.ts'

import { RECORD_ID_MAX_LENGTH, TriggerBody, WebhookSettingsChange, WorkflowPathParams } from './model.ts'
import { WebhookSettings } from '../workflows/model.ts'
import { WebhookRateLimiter } from './rate.ts'
import { changeWebhook } from './service.ts'
import { verifyWebhookToken } from '../../lib/webhook-url.ts'
import { read } from '../../db/read.ts'
import { unstorableTextProblem } from '../../lib/storable-text.ts'

/** Check 6: the body is a JSON object whose `record_id` is a non-empty string; other fields are ignored. */
export function parseTriggerBody(raw: unknown): string {
  const body = typeof raw === 'string' ? parseJsonText(raw) : raw
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw badRequest('invalid_body', "Invalid field 'body': must be a JSON object with a record_id")
  }
  const recordId = (body as Record<string, unknown>).record_id
  if (recordId === undefined) throw badRequest('missing_record_id', "Field 'record_id' is required")
  if (typeof recordId !== 'string' || recordId.length === 0 || recordId.length > RECORD_ID_MAX_LENGTH) {
    throw badRequest('invalid_record_id', `Field 'record_id' must be a non-empty string of at most ${RECORD_ID_MAX_LENGTH} characters`)
  }
  const unstorable = unstorableTextProblem(recordId)
  if (unstorable !== null) throw badRequest('invalid_record_id', `Field 'record_id' ${unstorable}`)
  return recordId
}

/** What a webhook call's token must carry (DESIGN §8 check 4). */
const TRIGGER: ProjectNeed = { scope: 'workflows:trigger' }

const WEBHOOK = '/v1/project/:projectName/environment/:environmentName/team/:teamName/workflows/:workflowName/webhook'

export function webhooksModule(deps: AppDeps) {
  const { tokens } = deps.auth
  const buckets = new WebhookRateLimiter(deps.clock, deps.rateCounters)
  const settingsOf = (target: Parameters<typeof webhookSettings>[0]) =>
    webhookSettings(target, deps.secret, deps.config.baseUrl, deps.config.webhookRatePerMinute)

  return new Elysia({ name: 'webhooks', tags: ['webhooks'] })
    .use(authPlugin(deps))
    .post('/v1/hooks/:token', async ({ params, request, body, set }) => {
      // 1. the URL: genuine, and of the current generation.
      const payload = verifyWebhookToken(deps.secret, params.token)
      if (!payload) throw badRequest('invalid_webhook_url', 'The webhook URL is malformed or has been tampered with')
      const target = await read(deps.store, findTriggerTarget(payload.workflowId))
      if (target && (target.renderingId !== payload.renderingId || payload.generation > target.webhookGeneration)) {
        throw badRequest('invalid_webhook_url', 'The webhook URL is malformed or has been tampered with')
      }
      if (target && payload.generation < target.webhookGeneration) {
        throw badRequest('webhook_url_superseded', 'This webhook URL was regenerated; copy the new one from the trigger settings')
      }
      // 2. the token.
      const identity = await tokens.authenticate(request.headers.get('authorization'))
      // 3. the workflow can be triggered.
      if (!target || !target.webhookEnabled || target.activeVersionId === null) {
        throw notFound('Unknown webhook, webhook trigger disabled, or no active workflow for the rendering')
      }
      // 4. the token's user may run it.
      authorizeToken(identity, target.projectId, TRIGGER)
      if (!(await read(deps.store, canReachRendering({ userId: identity.userId, projectId: target.projectId, teamId: target.teamId })))) {
        throw forbidden("The token's user cannot reach this workflow's team", 'rendering_forbidden')
      }
      // 4½. an Idempotency-Key (400 when invalid): a replay is answered now, before the rate and the 409 (as Stripe does).
      const call = idempotentCall(idempotencyKeyOf(request), typeof body === 'string' ? body : '', deps.config.idempotencyKeyWindowMs)
      const replayed = call === null ? null : await read(deps.store, replayedRunId(idempotencyScope({ target, userId: identity.userId }), call, deps.clock.now()))
      if (replayed !== null) return runAccepted(set, { runId: replayed, replayed: true })
      // 5. the webhook's rate.
      const retryAfter = await buckets.take(target.workflowId, target.webhookRatePerMinute ?? deps.config.webhookRatePerMinute)
      if (retryAfter > 0) throw tooManyRequests(retryAfter, 'Webhook rate limit exceeded')
      // 6. the body. 7–8. one active run per record, else queue it (with its key).
      const recordId = parseTriggerBody(body)
      const started = await startRunOnce(deps.store, deps.clock, {
        target,
        versionId: target.activeVersionId,
        recordId,
        userId: identity.userId,
        tokenId: identity.tokenId,
        trigger: 'webhook',
      }, call)
      if (!started.replayed) deps.executor?.notify()
      return runAccepted(set, started)
    }, {
      response: { 202: RunAccepted, ...errorResponses(400, 401, 403, 404, 409, 422, 429) },
      detail: {
        operationId: 'triggerWebhook',
        summary: 'Start a run of a workflow through its webhook URL',
        description:
          'The path segment is the signed token of the URL (`{payload}.{signature}`) copied from the trigger settings: keep it secret. ' +
          'Checks, in order: the URL (400), the token (401), the workflow enabled and published (404), the token’s user may run it (403), ' +
          'the webhook’s rate (429 + Retry-After), the body (400, 413), one active run per record (409 run_in_progress with its runId); then 202. ' +
          'With an Idempotency-Key, after the token’s user is authorized: an invalid key is 400; a replay is answered before the rate and the 409; ' +
          'the same key with another body (the raw body’s bytes differ) is 422 idempotency_key_reused.',
        security: BEARER,
        ...idempotencyDocs('the same raw body'),
        requestBody: { required: true, content: { 'application/json': { schema: TriggerBody } } },
      },
    })
    .get(
      WEBHOOK,
      async ({ params, caller }) => {
        const project = await read(deps.store, requireProjectAdmin(caller, params.projectName))
        return settingsOf((await read(deps.store, requireWorkflow(project.id, params.environmentName, params.teamName, params.workflowName))))
      },
      {
        accountCall: true,
        params: WorkflowPathParams,
        response: { 200: WebhookSettings, ...errorResponses(404) },
        detail: { operationId: 'getWebhookSettings', summary: 'The webhook trigger of a workflow: enabled, rate, URL (project admins)' },
      },
    )
    .patch(
      WEBHOOK,
      async ({ params, body, caller }) => {
        const target = await write(deps.store, function* () {
          const project = yield* requireProjectAdmin(caller, params.projectName)
          let target = yield* requireWorkflow(project.id, params.environmentName, params.teamName, params.workflowName)
          if (body.enabled !== undefined) target = (yield* changeWebhook(deps.clock, target, { enabled: body.enabled }, caller.user.id))
          if (body.ratePerMinute !== undefined) {
            target = yield* changeWebhook(deps.clock, target, { ratePerMinute: body.ratePerMinute }, caller.user.id)
          }
          return target
        })
        return settingsOf(target)
      },
      {
        accountCall: true,
        params: WorkflowPathParams,
        body: WebhookSettingsChange,
        response: { 200: WebhookSettings, ...errorResponses(400, 404) },
        detail: { operationId: 'updateWebhookSettings', summary: 'Enable or pause the webhook, or set its rate (null = instance default)' },
      },
    )
    .post(
      `${WEBHOOK}/regenerate`,
      async ({ params, caller }) => {
        const target = await write(deps.store, function* () {
          const project = yield* requireProjectAdmin(caller, params.projectName)
          const target = yield* requireWorkflow(project.id, params.environmentName, params.teamName, params.workflowName)
          return yield* changeWebhook(deps.clock, target, { regenerate: true }, caller.user.id)
        })
        return settingsOf(target)
      },
      {
        accountCall: true,
        params: WorkflowPathParams,
        response: { 200: WebhookSettings, ...errorResponses(404) },
        detail: { operationId: 'regenerateWebhookUrl', summary: 'A new URL; the old one answers 400 webhook_url_superseded from now on' },
      },
    )
}
