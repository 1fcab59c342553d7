/** The activity log list's answer: the compatibility document's `listActivityLogs` shapes. */
import { t } from 'elysia'
import { EnvironmentPageParameters, pageSchema } from '../../http/list-schema.ts'
import { ChainLinkField, documentedEnum, IsoDateTimeMicros, renderedAnswer } from '../../http/schemas.ts'
import { CollectionRef, EnvironmentRef, TeamRef, UserObject } from '../directory/model.ts'
import { ACTIVITY_ACTIONS, EXTENSION_ACTIVITY_ACTIONS } from './service.ts'

export const ActivityLog = t.Object(
  {
    object: t.Literal('activityLog'),
    id: t.String(),
    type: t.UnionEnum(['read', 'write']),
    action: documentedEnum(ACTIVITY_ACTIONS, `${EXTENSION_ACTIVITY_ACTIONS.join(', ')}: Trellis extensions, listed only with extensions=true`),
    label: t.Optional(t.String()),
    recordIds: t.Array(t.String()),
    createdAt: IsoDateTimeMicros,
    user: UserObject,
    environment: EnvironmentRef,
    team: TeamRef,
    collection: t.Optional(CollectionRef),
    workflow: t.Optional(
      t.Object({ object: t.Literal('workflow'), name: t.String(), runId: t.String(), stepName: t.Optional(t.String()) }),
    ),
    chain: ChainLinkField,
  },
  // Extension fields may be added by the service without a schema change (the compatibility document's own keep theirs).
  { $id: 'ActivityLog', additionalProperties: true },
)

export const ActivityLogPage = renderedAnswer(pageSchema(ActivityLog, EnvironmentPageParameters, 'A page of activity log entries, newest first'))
