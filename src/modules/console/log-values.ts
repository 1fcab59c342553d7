/**
 * The one way the console shows an admin log entry's before and after values: a list of "Label: value" lines,
 * internal fields (ids, object kinds, `codeCustomizationVersion`) left out, a user by their email, a list of named
 * things by their names. Trellis's extension entries keep the document's `{name}` shape with a sentence in it: shown
 * as that sentence.
 */
import { html, type Html } from '../../console/html.ts'

/** Fields of the compatibility document's shapes that mean nothing to a reader of the log. */
const INTERNAL_FIELDS = new Set(['object', 'id', 'codeCustomizationVersion'])

/** `permissionLevel` → `Permission level`. */
const labelOf = (key: string) => key.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase().replace(/^./, (c) => c.toUpperCase())

const shownFields = (value: object) => Object.entries(value).filter(([key, v]) => !INTERNAL_FIELDS.has(key) && v !== undefined && v !== null)

/** One value as text: a thing by its email or name, a list joined, anything else its fields in words. */
function plain(value: unknown): string {
  if (Array.isArray(value)) return value.length === 0 ? 'none' : value.map(plain).join(', ')
  if (value === null || value === undefined) return ''
  if (typeof value !== 'object') return typeof value === 'boolean' ? (value ? 'yes' : 'no') : String(value)
  const named = value as { email?: unknown; name?: unknown }
  if (typeof named.email === 'string') return named.email
  if (typeof named.name === 'string') return named.name
  return shownFields(value).map(([key, v]) => `${labelOf(key)}: ${plain(v)}`).join('; ')
}

export function adminLogValue(value: unknown): Html {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return html`${plain(value)}`
  const fields = shownFields(value)
  if (fields.length === 1 && fields[0]![0] === 'name') return html`${plain(fields[0]![1])}`
  return html`<ul class="fields">${fields.map(([key, v]) => html`<li>${labelOf(key)}: ${plain(v)}</li>`)}</ul>`
}

/** Who made a change that has no acting user: the identity provider (SSO auto-create), the system, or the CLI. */
export function actorWithoutUser(initiator: string): Html {
  return html`<span class="muted">${initiator === 'identityProvider' ? 'identity provider (SSO)' : initiator === 'system' ? 'system' : 'CLI'}</span>`
}
