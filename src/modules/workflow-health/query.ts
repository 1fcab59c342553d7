/** Workflow health's query string: the window, parsed as every list parses its filters (a bad one is a 400 naming it). */
import { parseEnumParameter, type Query } from '../../http/list.ts'
import { HEALTH_WINDOW_NAMES, type HealthWindow } from './service.ts'

/** `window`: day (the default) or week; anything else is a 400 naming it. */
export function parseHealthWindow(query: Query): HealthWindow {
  return parseEnumParameter(query, 'window', HEALTH_WINDOW_NAMES) ?? 'day'
}
