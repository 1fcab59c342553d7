/** Application tokens as the management API shows them; the value itself only once, at creation. */
import { t } from 'elysia'
import { IdParam } from '../../http/params.ts'
import { Integer, IsoDateTime, IsoDateTimeOrNull } from '../../http/schemas.ts'
import { UserObject } from '../directory/model.ts'
import { MAX_EXPIRY_DAYS, PRESETS, SCOPES } from './service.ts'

export const CreateTokenBody = t.Object({
  name: t.String({ minLength: 1, maxLength: 100 }),
  projectName: t.String({ minLength: 1, maxLength: 200 }),
  scopes: t.Optional(t.Array(t.String({ maxLength: 100, enum: [...SCOPES] }), { maxItems: 20 })),
  preset: t.Optional(t.String({ maxLength: 50, enum: Object.keys(PRESETS), description: 'Instead of scopes; default read-only' })),
  expiresAt: t.Optional(t.String({ maxLength: 64, description: 'ISO 8601 date-time' })),
  expiresInDays: t.Optional(Integer({ minimum: 1, maximum: MAX_EXPIRY_DAYS, description: 'Instead of expiresAt: the token expires this many days from now' })),
})

export const TokenIdParams = t.Object({ id: IdParam })

const tokenFields = {
  id: Integer(),
  name: t.String(),
  prefix: t.String({ description: 'The first 12 characters of the value, to recognise it' }),
  projectName: t.String(),
  scopes: t.Array(t.String({ enum: [...SCOPES] })),
  createdAt: IsoDateTime,
}

export const CreatedToken = t.Object(
  { ...tokenFields, token: t.String({ description: 'The value: shown once, never again' }), expiresAt: IsoDateTimeOrNull },
  { $id: 'CreatedToken' },
)

const listedFields = {
  ...tokenFields,
  lastUsedAt: IsoDateTimeOrNull,
  expiresAt: IsoDateTimeOrNull,
  createdWithSso: t.Boolean({ description: 'Generated while signed in with SSO: the only tokens an SSO project accepts' }),
}

export const Token = t.Object(listedFields, { $id: 'Token' })

export const TokenList = t.Object({ data: t.Array(Token) })

export const ProjectToken = t.Object(
  { ...listedFields, user: UserObject },
  { $id: 'ProjectToken' },
)

export const ProjectTokenList = t.Object({ data: t.Array(ProjectToken) })
