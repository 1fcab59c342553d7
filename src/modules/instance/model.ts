/** Bodies and answers of the instance administrators' routes (people, new projects). */
import { t } from 'elysia'
import { PERMISSION_LEVELS } from '../../lib/access.ts'
import { Integer, IsoDateTime } from '../../http/schemas.ts'
import { IdParam } from '../../http/params.ts'

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
