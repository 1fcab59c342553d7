/** Completion callbacks through the API: an endpoint's body and answers, a run's deliveries. */
import { t } from 'elysia'
import { Integer, IsoDateTime, IsoDateTimeOrNull } from '../../http/schemas.ts'
import { CALLBACK_EVENTS, CALLBACK_URL_MAX_LENGTH, RUN_CALLBACK_EVENTS } from '../../lib/callbacks.ts'
import { WorkflowParams } from '../workflows/model.ts'

const CallbackEvent = t.UnionEnum(CALLBACK_EVENTS)

/** The events an endpoint is sent; also the apply file's `callbacks[].events`. */
export const CallbackEvents = t.Array(CallbackEvent, {
  minItems: 1,
  maxItems: CALLBACK_EVENTS.length,
  description: `The events that are sent (each once; default: the three ends of a run, ${RUN_CALLBACK_EVENTS.join(', ')}); a task step's task opening, decided and closing are sent only when named`,
})

export const CallbackUrl = t.String({
  minLength: 1,
  maxLength: CALLBACK_URL_MAX_LENGTH,
  description: 'An http or https URL without user or password; an address outbound requests may not reach (loopback, private…) is refused unless the outbound allow-list opens it (/admin/outbound; TRELLIS_HTTP_ALLOW when set)',
})

export const NewCallbackEndpointBody = t.Object({ url: CallbackUrl, events: t.Optional(CallbackEvents) })

const endpointFields = {
  id: t.String({ format: 'uuid' }),
  url: t.String({
    description: 'Without its query and fragment (`https://erp.example.com/hook?[redacted]`), as runs and the admin log show URLs: the whole URL is shown only in the answer that adds the endpoint',
  }),
  events: t.Array(CallbackEvent),
  createdAt: IsoDateTime,
}

export const CallbackEndpoint = t.Object(endpointFields, { $id: 'CallbackEndpoint' })

export const CreatedCallbackEndpoint = t.Object(
  {
    ...endpointFields,
    url: t.String({ description: 'The URL as given, query included: shown whole only in this answer (every later read shows it without its query and fragment)' }),
    secret: t.String({
      description: 'The signing secret (`whsec_…`, Standard Webhooks): shown only in this answer. Derived from the instance secret: changing TRELLIS_SECRET changes it',
    }),
  },
  { $id: 'CreatedCallbackEndpoint' },
)

export const CallbackEndpointList = t.Object({ data: t.Array(CallbackEndpoint, { description: 'Oldest first' }) })

export const CallbackEndpointParams = t.Object({ ...WorkflowParams.properties, callbackId: t.String({ format: 'uuid' }) })

const CallbackAttempt = t.Object({
  attempt: Integer({ minimum: 1, description: 'Numbered over every attempt of the delivery (a resend goes on counting)' }),
  startedAt: IsoDateTime,
  durationMs: Integer({ minimum: 0 }),
  statusCode: t.Union([Integer(), t.Null()], { description: 'The answer’s status; null when none came (error)' }),
  error: t.Union([t.String(), t.Null()], { description: 'Why no answer came: refused destination, network error, timeout' }),
})

export const CallbackDelivery = t.Object(
  {
    id: t.String({ description: 'The `webhook-id` every attempt of this delivery sends' }),
    endpoint: t.Object({ id: t.String({ format: 'uuid' }), url: t.String({ description: 'Without user, password or query' }) }),
    type: CallbackEvent,
    status: t.UnionEnum(['pending', 'succeeded', 'failed']),
    nextAttemptAt: t.Union([IsoDateTime, t.Null()], { description: 'While pending: when it is sent next' }),
    createdAt: IsoDateTime,
    finishedAt: IsoDateTimeOrNull,
    attempts: t.Array(CallbackAttempt),
  },
  { $id: 'CallbackDelivery' },
)

export const CallbackDeliveryList = t.Object({ data: t.Array(CallbackDelivery, { description: 'One per endpoint and event of the run sent to it (its end, its tasks’ events), oldest first' }) })

export const DeliveryParams = t.Object({
  runId: t.String({ format: 'uuid' }),
  deliveryId: t.String({ pattern: '^msg_[0-9a-f]{32}$', maxLength: 36 }),
})
