/** Bodies and answers of the project management routes (structure, people, records). */

import { t } from 'elysia'
import { PERMISSION_LEVELS } from '../../lib/access.ts'
import { IdParam } from '../../http/params.ts'
import { Integer } from '../../http/schemas.ts'
import { UserObject } from '../directory/model.ts'
import { RECORD_ID_MAX_LENGTH, SchemaFields } from '../records/schema.ts'

/** A project, environment, team or collection name (also checked by nameProblem: not blank, no control characters). */
export const PartName = t.String({ minLength: 1, maxLength: 200 })
const Name = PartName

/** The whole settings (the console's form sends both); a new `projectName` renames the project. */
export const ProjectSettingsBody = t.Object({
  projectName: Name,
  sso: t.Boolean({ description: 'On: tokens not generated in an SSO session are refused from the next request' }),
})
export const NamedPart = t.Object({ name: t.String() })

export const MemberBody = t.Object({ role: t.Union(PERMISSION_LEVELS.map((r) => t.Literal(r))) })

/** The compatibility document's `user-project` value, as the admin log records it. */
export const Membership = t.Object(
  {
    user: UserObject,
    permissionLevel: t.Optional(t.String()),
    teams: t.Array(t.Object({ object: t.Literal('team'), name: t.String() })),
  }
)

export const MemberParams = t.Object({ projectName: t.String(), userId: IdParam })
export const TeamMemberParams = t.Object({ projectName: t.String(), teamName: t.String(), userId: IdParam })

export const RecordParams = t.Object({
  projectName: t.String(),
  environmentName: t.String(),
  collectionName: t.String(),
  recordId: t.String({ minLength: 1, maxLength: RECORD_ID_MAX_LENGTH }),
})

export const PutRecordBody = t.Object({
  data: t.Record(t.String(), t.Unknown(), { description: 'The record: a JSON object (replaces what is stored)' }),
  teamName: Name,
})

export const SavedRecord = t.Object({
  id: t.String(),
  data: t.Record(t.String(), t.Unknown()),
  outcome: t.Union([t.Literal('created'), t.Literal('updated'), t.Literal('unchanged')]),
})

export const CollectionParams = t.Object({ projectName: t.String(), collectionName: t.String() })

/** A collection's schema (docs/records.md); no fields: untyped records (any JSON object). */
export const CollectionSchemaBody = t.Object({ fields: SchemaFields })

export const CollectionSchemaView = t.Object({
  fields: SchemaFields,
  version: Integer({ minimum: 0, description: 'How many times the schema was changed (0: never)' }),
  updatedAt: t.Union([t.String({ format: 'date-time' }), t.Null()], { description: 'When it last changed; null: never' }),
})

export const CollectionSchemaChange = t.Object({
  ...CollectionSchemaView.properties,
  nonConforming: t.Object(
    {
      count: Integer({ minimum: 0 }),
      ids: t.Array(t.String(), { maxItems: 100, description: 'The first 100, by environment then id' }),
    },
    { description: 'Existing records (every environment) the schema refuses: they stay as they are and readable; their next write must conform' },
  ),
})

/** A project as the instance and project administrators' answers show it. */
export const ProjectView = t.Object({ name: t.String(), sso: t.Boolean() })
