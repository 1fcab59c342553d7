/**
 * Completion callbacks through the API (docs/workflows.md "Completion callbacks"): a workflow's endpoints, beside its webhook
 * trigger settings (project admins), and a run's deliveries with their attempts and a resend (as the run's own routes:
 * the triggering user or a project admin).
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { read } from '../../db/read.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { CALLBACK_MAX_ATTEMPTS, CALLBACK_TIMEOUT_MS, MAX_CALLBACKS_PER_WORKFLOW } from '../../lib/callbacks.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { NOTHING_ALLOWED } from '../../lib/outbound/policy.ts'
import { requireCallerScope, requireProjectAdmin } from '../auth/service.ts'
import { visibleRun } from '../runs/service.ts'
import { requireWorkflow } from '../workflows/service.ts'
import {
  CallbackDeliveryList,
  CallbackDelivery,
  CallbackEndpointList,
  CallbackEndpointParams,
  CreatedCallbackEndpoint,
  DeliveryParams,
  NewCallbackEndpointBody,
} from './model.ts'
import { WorkflowParams } from '../workflows/model.ts'
import { addCallbackEndpoint, type CallbackContext, listWorkflowCallbacks, removeCallbackEndpoint, renderRunCallbacks, resendRunCallback } from './service.ts'

const CALLBACKS = '/v1/project/:projectName/environment/:environmentName/team/:teamName/workflows/:workflowName/callbacks'

/** The workflow a callbacks path names, for a project admin (404 for an unknown one, 403 for other callers). */
function* adminWorkflow(caller: AccountCaller, params: { projectName: string; environmentName: string; teamName: string; workflowName: string }) {
  const project = yield* requireProjectAdmin(caller, params.projectName)
  return yield* requireWorkflow(project.id, params.environmentName, params.teamName, params.workflowName)
}

export function callbacksModule(deps: AppDeps) {
  // `allow`: what a new URL's address may be (the list in effect); a removal checks no URL.
  const context = (caller: AccountCaller, allow = NOTHING_ALLOWED): CallbackContext => ({ clock: deps.clock, secret: deps.secret, allow, actorId: caller.user.id })
  return new Elysia({ name: 'callbacks', tags: ['callbacks'] })
    .use(authPlugin(deps))
    .get(
      CALLBACKS,
      async ({ params, caller }) =>
        read(
          deps.store,
          (function* () {
            return { data: yield* listWorkflowCallbacks((yield* adminWorkflow(caller, params)).workflowId) }
          })(),
        ),
      {
        accountCall: true,
        params: WorkflowParams,
        response: { 200: CallbackEndpointList, ...errorResponses(400, 404) },
        detail: { operationId: 'listCallbacks', summary: 'The completion callback endpoints of a workflow, without their secrets or their URLs\' query (project admins)' },
      },
    )
    .post(
      CALLBACKS,
      async ({ params, body, caller, set }) => {
        const allow = await deps.outboundAllow.current()
        const created = await write(deps.store, function* () {
          return yield* addCallbackEndpoint(context(caller, allow), yield* adminWorkflow(caller, params), body)
        })
        set.status = 201
        return created
      },
      {
        accountCall: true,
        params: WorkflowParams,
        body: NewCallbackEndpointBody,
        response: { 201: CreatedCallbackEndpoint, ...errorResponses(400, 404, 409) },
        detail: {
          operationId: 'addCallback',
          summary: 'Add a completion callback endpoint: its signing secret and its whole URL are in this answer only (project admins)',
          description:
            'When a run of the workflow ends (succeeded, failed, cancelled — or the events chosen), the endpoint receives a JSON POST signed per ' +
            'Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature) with this secret. ' +
            `A 2xx within ${CALLBACK_TIMEOUT_MS / 1000} s is success; otherwise it is retried with exponential backoff and jitter, ${CALLBACK_MAX_ATTEMPTS} attempts at most. ` +
            `400 naming the field for a bad URL or event; 409 \`callback_exists\` for a URL the workflow has already, \`too_many_callbacks\` past ${MAX_CALLBACKS_PER_WORKFLOW}.`,
        },
      },
    )
    .delete(
      `${CALLBACKS}/:callbackId`,
      async ({ params, caller, set }) => {
        await write(deps.store, function* () {
          yield* removeCallbackEndpoint(context(caller), yield* adminWorkflow(caller, params), params.callbackId)
        })
        set.status = 204
      },
      {
        accountCall: true,
        params: CallbackEndpointParams,
        response: { 204: t.Void(), ...errorResponses(400, 404) },
        detail: { operationId: 'removeCallback', summary: 'Remove a completion callback endpoint, and its deliveries with it (project admins)' },
      },
    )
    .get(
      '/v1/workflow-runs/:runId/callbacks',
      async ({ params, caller }) =>
        read(
          deps.store,
          (function* () {
            yield* visibleRun(caller, params.runId)
            return { data: yield* renderRunCallbacks(params.runId) }
          })(),
        ),
      {
        userCall: true,
        params: t.Object({ runId: DeliveryParams.properties.runId }),
        response: { 200: CallbackDeliveryList, ...errorResponses(400, 404) },
        detail: { operationId: 'listRunCallbacks', summary: "A run's completion callback deliveries, each with its attempts (the triggering user or a project admin)" },
      },
    )
    .post(
      '/v1/workflow-runs/:runId/callbacks/:deliveryId/resend',
      async ({ params, caller, set }) => {
        requireCallerScope(caller, 'workflows:trigger')
        const resent = await write(deps.store, function* () {
          yield* visibleRun(caller, params.runId)
          yield* resendRunCallback(deps.clock, params.runId, params.deliveryId)
          return (yield* renderRunCallbacks(params.runId)).find((delivery) => delivery.id === params.deliveryId)!
        })
        set.status = 202
        return resent
      },
      {
        userCall: true,
        params: DeliveryParams,
        response: { 202: CallbackDelivery, ...errorResponses(400, 404, 409) },
        detail: {
          operationId: 'resendRunCallback',
          summary: 'Send a succeeded or failed callback delivery again, with the same webhook-id (409 while it is pending)',
          description: 'The delivery is due at once and gets a new series of attempts; its earlier attempts stay listed. Scope `workflows:trigger`.',
        },
      },
    )
}
