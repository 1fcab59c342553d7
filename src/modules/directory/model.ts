/** The shapes every answer embeds: the `{object, name}` references to an environment, a team or a collection, and the user object. */
import { t } from 'elysia'
import { Integer } from '../../http/schemas.ts'

export const EnvironmentRef = t.Object({ object: t.Literal('environment'), name: t.String() }, { $id: 'EnvironmentRef' })
export const TeamRef = t.Object({ object: t.Literal('team'), name: t.String() }, { $id: 'TeamRef' })
export const CollectionRef = t.Object({ object: t.Literal('collection'), name: t.String() }, { $id: 'CollectionRef' })

/** The compatibility document's user object, as every answer embeds it. */
export const UserObject = t.Object(
  {
    object: t.Literal('user'),
    id: Integer({ minimum: 0 }),
    username: t.String(),
    email: t.String({ description: 'The user email' }),
  },
  { $id: 'User' },
)
