/**
 * Console: a typed collection's records (docs/records.md "In the console") — the list in columns from the schema,
 * filtered, sorted and paged by the records API's own list (../records/query.ts) as plain GET links and forms, and
 * the record form generated from the schema: the input each type needs, label, description and required marked.
 * The form sends `data` as the API takes it; console.js puts the 422 `invalid_record` details beside each field.
 */
import { html, type Html, path, scrollingTable } from '../../console/html.ts'
import type { Query } from '../../http/list.ts'
import { toIso } from '../../lib/time.ts'
import { operatorsOf } from '../records/query.ts'
import type { SchemaField } from '../records/schema.ts'

/** The operators the console offers, in words; `in` (a list of values) is the API's alone. */
const OPERATOR_LABELS: Record<string, string> = { eq: '=', ne: '≠', lt: '<', lte: '≤', gt: '>', gte: '≥', contains: 'contains' }
const consoleOperators = (field: SchemaField) => operatorsOf(field.type).filter((op) => op !== 'in')

/** A field's filter: `f.<name>` its value, `o.<name>` its operator (the page's own names: a field may be called `sort`). */
const valueParam = (name: string) => `f.${name}`
const operatorParam = (name: string) => `o.${name}`

/** What a datetime-local input gives (`2026-11-02T08:41`, seconds optional), read as UTC, as the API takes a date-time. */
export function utcDateTime(local: string): string {
  return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/.test(local) ? `${local}:00Z` : /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?$/.test(local) ? `${local}Z` : local
}

/** A stored date-time as a datetime-local input shows it (UTC, to the second); '' when it is none. */
function localDateTime(value: unknown): string {
  if (typeof value !== 'string') return ''
  const at = Date.parse(value)
  return Number.isNaN(at) ? '' : toIso(at).slice(0, 19)
}

/** The collection page's query as the records list reads it: each field's filter as `<field>.<op>`, the sort and cursor. */
export function listQuery(query: Query, fields: readonly SchemaField[]): Query {
  const out: Query = { sort: query.sort, cursor: query.cursor }
  for (const field of fields) {
    const value = query[valueParam(field.name)]
    if (value === undefined || value === '') continue
    const op = query[operatorParam(field.name)] ?? 'eq'
    out[`${field.name}.${op}`] = field.type === 'datetime' ? utcDateTime(value) : value
  }
  return out
}

/** The page's own parameters (filters and sort), to carry into its sort links and its next page. */
function pageParams(query: Query, fields: readonly SchemaField[], change: Query = {}): string {
  const kept: [string, string][] = []
  for (const field of fields) {
    for (const name of [valueParam(field.name), operatorParam(field.name)]) if (query[name]) kept.push([name, query[name]!])
  }
  for (const [name, value] of Object.entries({ sort: query.sort, ...change })) if (value) kept.push([name, value])
  return new URLSearchParams(kept).toString()
}

const labelOf = (field: SchemaField) => field.label ?? field.name

/** One filter's value input: the type's own input (a number, a date, a choice). */
function filterInput(field: SchemaField, id: string, value: string): Html {
  const name = valueParam(field.name)
  const choice = (options: readonly string[]) =>
    html`<select id="${id}" name="${name}"><option value="">any</option>${options.map((o) => html`<option${o === value ? html` selected` : ''}>${o}</option>`)}</select>`
  switch (field.type) {
    case 'boolean': return choice(['true', 'false'])
    case 'select': return choice(field.options ?? [])
    case 'number':
    case 'integer': return html`<input id="${id}" name="${name}" type="number" step="${field.type === 'integer' ? '1' : 'any'}" value="${value}">`
    case 'date': return html`<input id="${id}" name="${name}" type="date" value="${value}">`
    case 'datetime': return html`<input id="${id}" name="${name}" type="datetime-local" step="1" value="${value}">`
    default: return html`<input id="${id}" name="${name}" maxlength="1024" value="${value}">`
  }
}

/** The filter form: per filterable field an operator and a value; the sort kept. A plain GET form. */
function filterForm(fields: readonly SchemaField[], query: Query, clearHref: string): Html {
  const filterable = fields.filter((f) => consoleOperators(f).length > 0)
  if (filterable.length === 0) return html``
  return html`<form method="get" class="filters typed-filters" id="record-filters" role="search" aria-label="Filter records">
${filterable.map((field, i) => {
  const chosen = query[operatorParam(field.name)] ?? 'eq'
  return html`<div class="filter"><label for="filter-${i}">${labelOf(field)}${field.type === 'datetime' ? ' (UTC)' : ''}</label>
<select name="${operatorParam(field.name)}" aria-label="${labelOf(field)}: comparison">${consoleOperators(field).map((op) => html`<option value="${op}"${op === chosen ? html` selected` : ''}>${OPERATOR_LABELS[op]}</option>`)}</select>
${filterInput(field, `filter-${i}`, query[valueParam(field.name)] ?? '')}</div>`
})}
${query.sort ? html`<input type="hidden" name="sort" value="${query.sort}">` : ''}
<p><button type="submit">Filter</button> <a href="${clearHref}">Clear</a></p></form>`
}

/** A value as the list and a record's page show it: short, readable, a relation linked to its record. */
function shownValue(field: SchemaField, value: unknown, recordHref: (collection: string, id: string) => string): Html | string {
  if (value === undefined || value === null) return ''
  switch (field.type) {
    case 'boolean': return value === true ? 'yes' : value === false ? 'no' : JSON.stringify(value)
    case 'multiselect': return Array.isArray(value) ? value.join(', ') : JSON.stringify(value)
    case 'relation': return typeof value === 'string' && field.collection ? html`<a class="mono" href="${recordHref(field.collection, value)}">${value}</a>` : JSON.stringify(value)
    case 'json': {
      const text = JSON.stringify(value)
      return html`<span class="mono">${text.length > 80 ? `${text.slice(0, 80)}…` : text}</span>`
    }
    default: return typeof value === 'string' ? value : JSON.stringify(value)
  }
}

const valueOf = (data: Record<string, unknown>, field: SchemaField) => (Object.hasOwn(data, field.name) ? data[field.name] : undefined)

/** A typed record read (those who may not write it): each field's label and value. */
export function typedRecordView(fields: readonly SchemaField[], data: Record<string, unknown>, recordHref: (collection: string, id: string) => string): Html {
  return html`<dl class="record-fields" id="record-data">${fields.map((f) => html`<dt>${labelOf(f)}</dt><dd>${shownValue(f, valueOf(data, f), recordHref)}</dd>`)}</dl>`
}

/**
 * The records in columns: id, each field, updated. A sortable field's header is a link that sorts by it (again:
 * the other way); the column sorted says so (aria-sort).
 */
function recordsTable(
  fields: readonly SchemaField[],
  rows: readonly { recordKey: string; data: string; updatedAt: number }[],
  page: { sort: string; query: Query; pagePath: string; recordHref: (collection: string, id: string) => string; ownHref: (id: string) => string },
): Html {
  const header = (field: SchemaField) => {
    if (operatorsOf(field.type).length === 0) return html`<th scope="col">${labelOf(field)}</th>`
    const ascending = page.sort === field.name
    const descending = page.sort === `-${field.name}`
    const next = ascending ? `-${field.name}` : field.name
    const sorted = ascending ? html` aria-sort="ascending"` : descending ? html` aria-sort="descending"` : ''
    const href = `${page.pagePath}?${pageParams(page.query, fields, { sort: next })}`
    return html`<th scope="col"${sorted}><a class="sort" href="${href}">${labelOf(field)}${ascending ? ' ▲' : descending ? ' ▼' : ''}</a></th>`
  }
  return scrollingTable(html`<table class="records"><thead><tr><th scope="col">Record id</th>${fields.map(header)}<th scope="col">Updated</th></tr></thead><tbody>
${rows.map((r) => {
  const data = JSON.parse(r.data) as Record<string, unknown>
  return html`<tr><td><a class="mono record-link" href="${page.ownHref(r.recordKey)}">${r.recordKey}</a></td>${fields.map((f) => html`<td>${shownValue(f, valueOf(data, f), page.recordHref)}</td>`)}<td>${toIso(r.updatedAt)}</td></tr>`
})}
</tbody></table>`)
}

/** A typed collection's list: the filters, a bad filter's message, the records in columns, and the next page's link. */
export function typedRecordList(list: {
  fields: readonly SchemaField[]
  query: Query
  rows: readonly { recordKey: string; data: string; updatedAt: number }[]
  listed?: { sort: string; nextCursor?: string }
  filterError?: string
  pagePath: string
  recordHref: (collection: string, id: string) => string
}): Html {
  const { fields, query, pagePath } = list
  const filtered = fields.some((f) => query[valueParam(f.name)])
  const next = list.listed?.nextCursor ? html`<p class="pager"><a href="${`${pagePath}?${pageParams(query, fields, { cursor: list.listed.nextCursor })}`}">Next →</a></p>` : ''
  return html`${filterForm(fields, query, pagePath)}${list.filterError ? html`<p class="error" role="alert">${list.filterError}</p>` : ''}${
    list.rows.length === 0
      ? html`<p class="muted">No records${filtered ? ' match these filters' : ''}${query.cursor ? ' after these' : ''}.</p>`
      : recordsTable(fields, list.rows, { sort: list.listed?.sort ?? '', query, pagePath, recordHref: list.recordHref, ownHref: (id) => `${pagePath}/r/${encodeURIComponent(id)}` })
  }${next}`
}

/** Where a record is written: the records API of this place, `{recordId}` left for the form to fill (a new record). */
export const recordsApiPath = (place: { project: string; environment: string; collection: string }) =>
  path('v1', 'project', place.project, 'environment', place.environment, 'collection', place.collection, 'records')

/** One field's input, with its label, required marker and description; `data-in="data"`: it goes into the body's `data`. */
function recordInput(field: SchemaField, value: unknown, index: number, idsPath: (collection: string) => string): Html {
  const id = `field-${index}`
  const hintId = `field-hint-${index}`
  const hint = field.description ? html`<span class="hint" id="${hintId}">${field.description}</span>` : ''
  const described = field.description ? html` aria-describedby="${hintId}"` : ''
  const req = field.required ? html` required` : ''
  const marker = field.required ? html` <span class="muted">(required)</span>` : ''
  const label = labelOf(field)
  const text = typeof value === 'string' ? value : value === undefined || value === null ? '' : JSON.stringify(value)
  const common = html`id="${id}" name="${field.name}" data-in="data"${req}${described}`
  const labelled = (control: Html, suffix: Html | string = '') => html`<label for="${id}">${label}${suffix}${marker}</label>${control}${hint}`
  switch (field.type) {
    case 'boolean':
      return html`<label class="check"><input type="checkbox" ${common}${value === true ? html` checked` : ''}> ${label}${marker}</label>${hint}`
    case 'number':
    case 'integer':
      return labelled(html`<input type="number" step="${field.type === 'integer' ? '1' : 'any'}" data-type="number" ${common} value="${typeof value === 'number' ? String(value) : text}">`)
    case 'date': return labelled(html`<input type="date" data-optional ${common} value="${text}">`)
    case 'datetime': return labelled(html`<input type="datetime-local" step="1" data-type="utc-datetime" ${common} value="${localDateTime(value)}">`, ' (UTC)')
    case 'email': return labelled(html`<input type="email" maxlength="320" data-optional ${common} value="${text}">`)
    case 'url': return labelled(html`<input type="url" maxlength="2048" data-optional ${common} value="${text}">`)
    case 'select':
      return labelled(html`<select data-optional ${common}><option value="">—</option>${(field.options ?? []).map((o) => html`<option${o === value ? html` selected` : ''}>${o}</option>`)}</select>`)
    case 'multiselect': {
      const chosen = Array.isArray(value) ? value : []
      return html`<fieldset class="choices"${described}><legend>${label}${marker}</legend>${(field.options ?? []).map(
        (o) => html`<label class="check"><input type="checkbox" name="${field.name}" data-in="data" data-list value="${o}"${chosen.includes(o) ? html` checked` : ''}> ${o}</label>`,
      )}</fieldset>${hint}`
    }
    case 'json':
      return labelled(html`<textarea rows="4" data-type="json" ${common}>${value === undefined ? '' : JSON.stringify(value, null, 2)}</textarea>`, ' (JSON)')
    case 'relation':
      return labelled(
        html`<input list="${id}-ids" autocomplete="off" maxlength="1024" data-optional data-ids="${idsPath(field.collection ?? '')}" ${common} value="${text}"><datalist id="${id}-ids"></datalist>`,
        html` <span class="muted">(a record of ${field.collection ?? ''})</span>`,
      )
    default:
      return labelled(html`<input data-optional ${common} value="${text}">`)
  }
}

/**
 * The record form of a typed collection: its fields filled from `data` (a new record: the id asked too, and the
 * fields empty). `novalidate`: the API's check is the one every caller meets, its message beside the field.
 */
export function typedRecordForm(form: {
  id: string
  action: string
  teamName: string
  fields: readonly SchemaField[]
  data?: Record<string, unknown>
  done: string
  idsPath: (collection: string) => string
}): Html {
  const data = form.data ?? {}
  return html`<form id="${form.id}" class="record-form" novalidate data-api data-method="PUT" action="${form.action}" data-done="${form.done}">
${form.data === undefined ? html`<label>Record id <span class="muted">(required)</span> <input data-path="recordId" required maxlength="1024"></label>` : ''}
<input type="hidden" name="teamName" value="${form.teamName}">
${form.fields.map((field, i) => recordInput(field, valueOf(data, field), i, form.idsPath))}
<p class="form-error" role="alert"></p>
<button type="submit">Save record</button>
</form>`
}
