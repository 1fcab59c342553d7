/** The activity log list's query string, parsed (the API route and the console page); the service takes the result. */
import { parseEnumParameter, parseExtensibleEnumParameter, parseExtensionsParameter, parseRecordFilters, type Query } from '../../http/list.ts'
import { type ActivityFilters, DOCUMENTED_ACTIVITY_ACTIONS, EXTENSION_ACTIVITY_ACTIONS } from './service.ts'

/** The list's date filters (`createdAt.lt=…`). */
export const ACTIVITY_DATE_FIELDS = ['createdAt'] as const

/**
 * The filters of `GET …/activity-logs` (and the console's activity page) from the query string; 400 names a bad
 * one. `extensions` comes from the query unless the caller decides (the console shows everything).
 */
export function parseActivityFilters(query: Query, options: { extensions?: boolean } = {}): ActivityFilters {
  const extensions = options.extensions ?? parseExtensionsParameter(query)
  return {
    ...parseRecordFilters(query),
    action: parseExtensibleEnumParameter(query, 'action', { documented: DOCUMENTED_ACTIVITY_ACTIONS, extensions: EXTENSION_ACTIVITY_ACTIONS }, extensions),
    type: parseEnumParameter(query, 'type', ['read', 'write'] as const),
    extensions,
  }
}
