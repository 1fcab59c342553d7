/** The compatibility document's user object, as every answer embeds it. */
import { t } from 'elysia'
import { Integer } from '../../http/schemas.ts'

export const UserObject = t.Object(
  {
    object: t.Literal('user'),
    id: Integer({ minimum: 0 }),
    username: t.String(),
    email: t.String({ description: 'The user email' }),
  },
  { $id: 'User' },
)
