/** The `{object, name}` references to an environment, a team or a collection that answers embed. */
import { t } from 'elysia'

export const EnvironmentRef = t.Object({ object: t.Literal('environment'), name: t.String() }, { $id: 'EnvironmentRef' })
export const TeamRef = t.Object({ object: t.Literal('team'), name: t.String() }, { $id: 'TeamRef' })
export const CollectionRef = t.Object({ object: t.Literal('collection'), name: t.String() }, { $id: 'CollectionRef' })
