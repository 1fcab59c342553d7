/** The apply file (DESIGN §9). Field names are a contract; unknown fields are errors so typos never pass silently. */
import { type Static, Type as T } from '@sinclair/typebox'
import { PERMISSION_LEVELS } from '../../lib/access.ts'
import { SchemaFields } from '../records/schema.ts'
import { CALLBACK_EVENTS, CALLBACK_URL_MAX_LENGTH, MAX_CALLBACKS_PER_WORKFLOW } from '../../lib/callbacks.ts'

const Name = T.String({ minLength: 1, maxLength: 200 })
const Email = T.String({ minLength: 3, maxLength: 320 })
const IsoTime = T.String({ minLength: 1, maxLength: 64 })
const strict = { additionalProperties: false } as const

export const ApplyUser = T.Object(
  {
    email: Email,
    username: T.String({ minLength: 1, maxLength: 100 }),
    password: T.Optional(T.String({ maxLength: 1024 })),
    disabled: T.Optional(T.Boolean()),
    /** Instance administrator (docs/administration.md "Instance administrators"); absent leaves it as it is. */
    instanceAdmin: T.Optional(T.Boolean()),
  },
  strict,
)

export const ApplyProject = T.Object(
  {
    name: Name,
    sso: T.Optional(T.Boolean()),
    environments: T.Optional(T.Array(Name)),
    teams: T.Optional(T.Array(T.Object({ name: Name, members: T.Optional(T.Array(Email)) }, strict))),
    members: T.Optional(
      T.Array(T.Object({ user: Email, role: T.Union(PERMISSION_LEVELS.map((r) => T.Literal(r))) }, strict)),
    ),
    collections: T.Optional(
      T.Array(
        T.Object(
          {
            name: Name,
            permissions: T.Optional(
              T.Record(T.String(), T.Object({ read: T.Optional(T.Boolean()), edit: T.Optional(T.Boolean()) }, strict)),
            ),
            /** The records' schema (docs/records.md); `fields: []` makes them untyped again, absent leaves it as it is. */
            schema: T.Optional(T.Object({ fields: SchemaFields }, strict)),
          },
          strict,
        ),
      ),
    ),
    records: T.Optional(
      T.Array(
        T.Object(
          {
            environment: Name,
            collection: Name,
            id: T.String({ minLength: 1, maxLength: 1024 }),
            data: T.Record(T.String(), T.Unknown()),
            /** The team the activity entry names (default: the oldest team allowed to edit the collection). */
            team: T.Optional(Name),
          },
          strict,
        ),
      ),
    ),
    /** Checked step by step by workflowDefinitionProblems(); each may hold `callbacks` (ApplyCallbacks). */
    workflows: T.Optional(T.Array(T.Unknown())),
    notes: T.Optional(
      T.Array(
        T.Object(
          {
            environment: Name,
            team: Name,
            collection: Name,
            recordId: T.String({ minLength: 1, maxLength: 1024 }),
            title: T.String({ minLength: 1, maxLength: 500 }),
            user: Email,
            createdAt: T.Optional(IsoTime),
            updatedAt: T.Optional(IsoTime),
            archivedAt: T.Optional(IsoTime),
            messages: T.Optional(
              T.Array(
                T.Object(
                  { user: Email, content: T.String({ minLength: 1, maxLength: 65_536 }), createdAt: T.Optional(IsoTime) },
                  strict,
                ),
              ),
            ),
          },
          strict,
        ),
      ),
    ),
  },
  strict,
)

/**
 * A workflow's `callbacks` (docs/workflows.md "Completion callbacks"): matched by URL; `events` absent means all three. Not part
 * of the definition's version, like `webhook`.
 */
export const ApplyCallbacks = T.Array(
  T.Object(
    {
      url: T.String({ minLength: 1, maxLength: CALLBACK_URL_MAX_LENGTH }),
      events: T.Optional(T.Array(T.Union(CALLBACK_EVENTS.map((event) => T.Literal(event))), { minItems: 1, maxItems: CALLBACK_EVENTS.length })),
    },
    strict,
  ),
  { maxItems: MAX_CALLBACKS_PER_WORKFLOW },
)
export type ApplyCallbacks = Static<typeof ApplyCallbacks>

/** The identity provider for "Sign in with SSO"; its secret only ever comes from TRELLIS_OIDC_CLIENT_SECRET. null removes it. */
export const ApplySso = T.Union([
  T.Object(
    { issuer: T.String({ minLength: 1, maxLength: 2000 }), clientId: T.String({ minLength: 1, maxLength: 500 }), autoCreate: T.Optional(T.Boolean()) },
    strict,
  ),
  T.Null(),
])

export const ApplyFile = T.Object(
  { sso: T.Optional(ApplySso), users: T.Optional(T.Array(ApplyUser)), projects: T.Optional(T.Array(ApplyProject)) },
  strict,
)

export type ApplyFile = Static<typeof ApplyFile>
export type ApplyProject = Static<typeof ApplyProject>
