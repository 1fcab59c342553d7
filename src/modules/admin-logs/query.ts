/** The admin log list's query string, parsed (the API route and the console page); the service takes the result. */
import { MAX_EMAIL_LENGTH, parseEnumParameter, parseExtensibleEnumParameter, parseExtensionsParameter, parseIdParameter, parseStringParameter, type Query } from '../../http/list.ts'
import {
  ADMIN_LOG_TYPES,
  type AdminLogFilters,
  DOCUMENTED_ADMIN_LOG_INITIATORS,
  DOCUMENTED_ADMIN_LOG_RESOURCES,
  EXTENSION_ADMIN_LOG_INITIATORS,
  EXTENSION_ADMIN_LOG_RESOURCES,
} from './service.ts'

/** The list's date filters (`createdAt.lt=…`). */
export const ADMIN_LOG_DATE_FIELDS = ['createdAt'] as const

/**
 * The filters of `GET …/admin-logs` (and the console's admin log page) from the query string; 400 names a bad
 * one. `extensions` comes from the query unless the caller decides (the console shows everything).
 */
export function parseAdminLogFilters(query: Query, options: { extensions?: boolean } = {}): AdminLogFilters {
  const extensions = options.extensions ?? parseExtensionsParameter(query)
  return {
    userEmail: parseStringParameter(query, 'userEmail', MAX_EMAIL_LENGTH),
    userId: parseIdParameter(query, 'userId'),
    type: parseEnumParameter(query, 'type', ADMIN_LOG_TYPES),
    initiator: parseExtensibleEnumParameter(query, 'initiator', { documented: DOCUMENTED_ADMIN_LOG_INITIATORS, extensions: EXTENSION_ADMIN_LOG_INITIATORS }, extensions),
    resource: parseExtensibleEnumParameter(query, 'resource', { documented: DOCUMENTED_ADMIN_LOG_RESOURCES, extensions: EXTENSION_ADMIN_LOG_RESOURCES }, extensions),
    extensions,
  }
}
