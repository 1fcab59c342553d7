/**
 * `{{record.<field>}}`, `{{record.id}}`, `{{workflow.name}}`, `{{run.id}}`, `{{now}}` and a task's outcome
 * (`{{tasks.<step>.decision}}`, `.decidedBy`, `.input.<field>`) in step strings, deeply.
 */
import { redactUrl } from './outbound/redact.ts'
import { PLACEHOLDER, placeholderInHead, placeholderInHeadMessage, urlHead } from './outbound/url-template.ts'

export interface TemplateVariables {
  recordId: string
  record: Record<string, unknown> | null
  workflowName: string
  runId: string
  now: string
  /** The outcomes of the run's task steps closed so far, by step name. */
  tasks: TaskOutcomes
}

/** A closed task as later steps read it: `approved` or `rejected`, what the deciding form held, who decided (emails, comma-separated). */
export interface TaskOutcome {
  taskId: string
  decision: string
  input: Record<string, unknown> | null
  decidedBy: string
}
export type TaskOutcomes = ReadonlyMap<string, TaskOutcome>

/** The value at `tasks.<step>.<path>` of the run's task outcomes, or undefined (a condition's field, a template's variable). */
export function taskField(tasks: TaskOutcomes, path: string): unknown {
  const [, name, ...rest] = path.split('.')
  const outcome = name === undefined ? undefined : tasks.get(name)
  return outcome === undefined ? undefined : recordField(outcome as unknown as Record<string, unknown>, rest.join('.'))
}

/**
 * The value at a dotted path (`customer.name`) of a record's data, or undefined. Own properties only: a field named
 * `constructor` or `toString` is absent unless the record has it, never one of Object.prototype's.
 */
export function recordField(record: Record<string, unknown> | null, path: string): unknown {
  let value: unknown = record
  for (const part of path.split('.')) value = value && typeof value === 'object' && Object.hasOwn(value, part) ? (value as Record<string, unknown>)[part] : undefined
  return value
}

function lookup(name: string, vars: TemplateVariables): string {
  if (name === 'record.id') return vars.recordId
  if (name === 'workflow.name') return vars.workflowName
  if (name === 'run.id') return vars.runId
  if (name === 'now') return vars.now
  const value = name.startsWith('record.') ? recordField(vars.record, name.slice('record.'.length)) : name.startsWith('tasks.') ? taskField(vars.tasks, name) : undefined
  if (value === undefined || value === null) return ''
  return typeof value === 'object' ? JSON.stringify(value) : String(value)
}

export function renderTemplate<T>(value: T, vars: TemplateVariables): T {
  if (typeof value === 'string') return value.replace(PLACEHOLDER, (_, name: string) => lookup(name, vars)) as T
  if (Array.isArray(value)) return value.map((v) => renderTemplate(v, vars)) as T
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderTemplate(v, vars)])) as T
  }
  return value
}

/** A URL template that cannot become a URL to call. */
export class UrlTemplateError extends Error {}

const DOT_SEGMENT = /^(\.|%2e){1,2}$/i

/**
 * Renders a URL template: every value is percent-encoded as one component (`encodeURIComponent`: `/`, `?`, `#`, `&`,
 * `=`, `@`… are escaped), so a value can fill a path segment or a query value but never change the URL's structure.
 * Templates may not stand in the scheme or authority (the definition refuses them when saved; one saved before is
 * refused here), and the rendered URL must keep the origin written in the step. A "." or ".." segment would still
 * move the path (URL parsers resolve them, even encoded): such a URL is refused.
 */
export function renderUrl(template: string, vars: TemplateVariables): URL {
  const inHead = placeholderInHead(template)
  if (inHead !== null) throw new UrlTemplateError(placeholderInHeadMessage(inHead))
  const head = urlHead(template)
  if (!URL.canParse(head)) throw new UrlTemplateError(`${redactUrl(head)} is not a valid URL`)
  const rendered = template.replace(PLACEHOLDER, (_, name: string) => encodeURIComponent(lookup(name, vars)))
  const path = rendered.slice(urlHead(rendered).length).split(/[?#]/)[0]!
  const dots = path.split(/[/\\]/).find((segment) => DOT_SEGMENT.test(segment))
  if (dots !== undefined) throw new UrlTemplateError(`the URL ${redactUrl(rendered)} has a "${dots}" path segment, which would change its path`)
  if (!URL.canParse(rendered)) throw new UrlTemplateError(`${redactUrl(rendered)} is not a valid URL`)
  const url = new URL(rendered)
  const written = new URL(head).origin
  if (url.origin !== written) throw new UrlTemplateError(`the values placed in the URL would change its origin ${written}`)
  return url
}
