/** Bodies and answers of the instance administrators' routes (people, new projects). */
import { t } from 'elysia'
import { PERMISSION_LEVELS } from '../../lib/access.ts'
import { Integer, IsoDateTime } from '../../http/schemas.ts'
import { IdParam } from '../../http/params.ts'
import { MAX_ALLOW_ENTRIES, MAX_ALLOW_ENTRY_LENGTH } from './outbound-allow.ts'

export const InstanceUser = t.Object(
  {
    id: Integer({ minimum: 1 }),
    email: t.String(),
    username: t.String(),
    instanceAdmin: t.Boolean(),
    deactivated: t.Boolean(),
    hasPassword: t.Boolean({ description: 'False until the person sets one (an invitation not yet used)' }),
    createdAt: IsoDateTime,
  }
)

export const Invitation = t.Object(
  {
    url: t.String({ description: 'The one-time link: shown in this answer only' }),
    expiresAt: IsoDateTime,
    emailed: t.Boolean({ description: 'The link was also queued as an e-mail to the person (an SMTP server is configured)' }),
  }
)

export const CreateUserBody = t.Object({
  email: t.String({ minLength: 1, maxLength: 320 }),
  username: t.String({ minLength: 1, maxLength: 100 }),
  password: t.Optional(t.String({ minLength: 12, maxLength: 1024, description: 'Without it, an invitation link is made' })),
  instanceAdmin: t.Optional(t.Boolean()),
})

export const CreatedUser = t.Object({ user: InstanceUser, invitation: t.Optional(Invitation) })

/** The whole state (the console's forms send all three). */
export const UpdateUserBody = t.Object({
  username: t.String({ minLength: 1, maxLength: 100 }),
  instanceAdmin: t.Boolean(),
  deactivated: t.Boolean({ description: 'Deactivated users are refused everywhere and their sessions end' }),
})

export const UserIdParams = t.Object({ id: IdParam })

const Name = t.String({ minLength: 1, maxLength: 200 })
export const CreateProjectBody = t.Object({ name: Name, sso: t.Optional(t.Boolean()) })
export const ROLE = t.Union(PERMISSION_LEVELS.map((r) => t.Literal(r)))

const AllowEntry = t.String({ maxLength: MAX_ALLOW_ENTRY_LENGTH, description: 'A host name (opened whatever it resolves to), an IP address or a CIDR range', examples: ['hooks.internal', '127.0.0.1', '10.1.0.0/16'] })

export const OutboundAllow = t.Object({
  entries: t.Array(t.String(), { description: 'The allow-list in effect' }),
  setByEnvironment: t.Boolean({ description: 'TRELLIS_HTTP_ALLOW is set: `entries` are its, and the list kept here is neither used nor changed' }),
  storedEntries: t.Array(t.String(), { description: 'The list kept through this API and the console (in effect unless TRELLIS_HTTP_ALLOW is set)' }),
})

export const OutboundAllowBody = t.Object({
  entries: t.Array(AllowEntry, { maxItems: MAX_ALLOW_ENTRIES, description: 'The whole list (blank items are dropped, repeats kept once)' }),
})
