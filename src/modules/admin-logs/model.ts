/** The admin log list's answer: the compatibility document's `listAdminLogs` shapes. */
import { t } from 'elysia'
import { pageSchema, ProjectPageParameters } from '../../http/list-schema.ts'
import { ChainLinkField, documentedEnum, IsoDateTimeMicros, renderedAnswer } from '../../http/schemas.ts'
import { UserObject } from '../directory/model.ts'
import { ADMIN_LOG_INITIATORS, ADMIN_LOG_RESOURCES, ADMIN_LOG_TYPES, EXTENSION_ADMIN_LOG_INITIATORS, EXTENSION_ADMIN_LOG_RESOURCES } from './service.ts'

export const AdminLog = t.Object(
  {
    object: t.Literal('adminLog'),
    id: t.String(),
    type: documentedEnum(ADMIN_LOG_TYPES),
    resource: documentedEnum(ADMIN_LOG_RESOURCES, `${EXTENSION_ADMIN_LOG_RESOURCES.join(', ')}: Trellis extensions, listed only with extensions=true`),
    initiator: documentedEnum(ADMIN_LOG_INITIATORS, `${EXTENSION_ADMIN_LOG_INITIATORS.join(', ')}: Trellis extensions, listed only with extensions=true`),
    createdAt: IsoDateTimeMicros,
    user: t.Optional(UserObject),
    previousValue: t.Optional(t.Unknown({ description: 'The resource before the change (shape per resource)' })),
    newValue: t.Optional(t.Unknown({ description: 'The resource after the change (shape per resource)' })),
    chain: ChainLinkField,
  },
  { $id: 'AdminLog', additionalProperties: true },
)

export const AdminLogPage = renderedAnswer(pageSchema(AdminLog, ProjectPageParameters, 'A page of admin log entries, newest first'))
