/**
 * Records as CSV (docs/records.md "CSV export and import"), pure: the columns of a collection, a record as one CSV
 * line, a CSV text read back into lines of record data. Export and import are one format, so a file exported and
 * imported again changes nothing. The rules, in one place:
 * - columns: `id`, the schema's fields in order, `createdAt`, `updatedAt`; an untyped collection: `id`, `data` (the
 *   record's JSON), `createdAt`, `updatedAt`. On import `createdAt` and `updatedAt` are read-only: they are ignored;
 * - an absent or null value is an empty cell, and an empty cell is no value (so a text field's empty string reads
 *   back as absent); a `json` field's null is the cell `null`;
 * - `number` and `integer` as JavaScript writes them (`12.5`, `-3`, `1e+21`); `boolean` `true` or `false`;
 * - `multiselect` its values joined by `;` (`a;b`), or a JSON array (`["a;1","b"]`) when a value holds `;` or the first
 *   starts with `[`; import takes both;
 * - `json` the value's JSON text; every other type its text as it is;
 * - RFC 4180: a cell holding `,`, `"`, CR or LF is quoted, `"` doubled; lines end in CRLF;
 * - formula injection: a cell a spreadsheet would run as a formula (first character `=`, `+`, `-`, `@`, tab or CR)
 *   gets a leading `'`, and so does one that already starts with `'` before such a character; import removes one
 *   `'` from a cell of that shape, so the guard round-trips. Numbers are written as numbers, unguarded.
 */
import { parse } from 'csv-parse/sync'
import { badRequest } from '../../lib/errors.ts'
import { pointer, type StoredField } from './schema.ts'

export const CSV_CONTENT_TYPE = 'text/csv; charset=utf-8'
const READ_ONLY_COLUMNS = ['createdAt', 'updatedAt'] as const
const UNTYPED_DATA = 'data'

/** A collection's CSV header: id, its fields (untyped: data), createdAt, updatedAt. */
export function csvColumns(fields: readonly StoredField[]): string[] {
  return ['id', ...(fields.length === 0 ? [UNTYPED_DATA] : fields.map((f) => f.name)), ...READ_ONLY_COLUMNS]
}

const FORMULA = /^'*[=+\-@\t\r]/
const GUARDED = /^'+[=+\-@\t\r]/

/** RFC 4180 quoting, after the formula guard. */
function csvCell(text: string, guard = true): string {
  const safe = guard && FORMULA.test(text) ? `'${text}` : text
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe
}

/** One CSV line (CRLF-terminated) of already formatted cell texts. */
export const csvLine = (cells: readonly string[]): string => `${cells.map((c) => csvCell(c)).join(',')}\r\n`

/** The header line of a collection's export. */
export const csvHeaderLine = (fields: readonly StoredField[]): string => csvLine(csvColumns(fields))

/** A value of `field` as its cell's text (before quoting). */
function cellText(field: StoredField | null, value: unknown): string {
  if (value === undefined) return ''
  // A json field's null is a value (`null`); any other field's null is no value, as absent.
  if (field === null || field.type === 'json') return JSON.stringify(value)
  if (value === null) return ''
  if (field.type === 'multiselect' && Array.isArray(value)) {
    const values = value.map(String)
    return values.some((v) => v.includes(';')) || values[0]?.startsWith('[') ? JSON.stringify(values) : values.join(';')
  }
  return typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value)
}

/** One record as a CSV line, its cells in `csvColumns(fields)` order. */
export function recordCsvLine(fields: readonly StoredField[], record: { id: string; data: Record<string, unknown>; createdAt: string; updatedAt: string }): string {
  const values =
    fields.length === 0
      ? [csvCell(JSON.stringify(record.data))]
      : fields.map((f) => {
          const value = Object.hasOwn(record.data, f.name) ? record.data[f.name] : undefined
          const numeric = (f.type === 'number' || f.type === 'integer') && typeof value === 'number'
          return csvCell(cellText(f, value), !numeric)
        })
  return `${[csvCell(record.id), ...values, record.createdAt, record.updatedAt].join(',')}\r\n`
}

// ── Import ────────────────────────────────────────────────────────────────────

/** Where each column of a file goes: a field (or `id`, `data`), read-only (ignored), or nowhere (unknown). */
export interface ColumnMapping {
  column: string
  /** The field it fills (`id` for the record id, `data` for an untyped collection's JSON); null: not imported. */
  field: string | null
  type: string | null
  /** Why it is not imported: `read-only` (createdAt, updatedAt) or `unknown` (no such field). */
  ignored?: 'read-only' | 'unknown'
}

/** One line that cannot be written, as the import reports it. */
export interface LineError {
  line: number
  field: string
  reason: string
}

/** A line of the file read as a record: its first physical line, id and data (absent when a cell was refused). */
export interface CsvRecordLine {
  line: number
  id: string
  data: Record<string, unknown> | null
  errors: LineError[]
}

export interface ParsedCsv {
  columns: ColumnMapping[]
  lines: CsvRecordLine[]
}

const invalidCsv = (message: string, field = 'body') => badRequest('invalid_csv', message, { details: [{ field, message }] })

/**
 * A CSV text read against a collection's fields: the header mapped to fields, each following line a record id and
 * its data, each cell read as its field's type. A malformed file (an unclosed quote, a stray quote) or a header
 * without `id` is 400 `invalid_csv`; a cell of the wrong type is a line error. A repeated column is refused; a
 * repeated id is an error of its second line.
 */
export function parseRecordsCsv(text: string, fields: readonly StoredField[]): ParsedCsv {
  const rows = csvRows(text)
  const [head, ...body] = rows
  if (!head) throw invalidCsv('The body is empty: the first line must name the columns (id, then fields)')
  const columns = mapColumns(head.record, fields)
  const byField = new Map(fields.map((f) => [f.name, f]))
  const seen = new Map<string, number>()
  const lines = body.map(({ record, line }): CsvRecordLine => {
    const errors: LineError[] = []
    const fail = (field: string, reason: string) => errors.push({ line, field, reason })
    if (record.length > columns.length) fail('body', `has ${record.length} cells; the header names ${columns.length} columns`)
    let id = ''
    const data: Record<string, unknown> = {}
    columns.forEach((column, i) => {
      const cell = unguard(record[i] ?? '')
      if (column.field === 'id' && column.type === null) id = cell
      else if (column.field === UNTYPED_DATA && fields.length === 0) {
        const read = readJson(cell)
        if (read === undefined || read === null || typeof read !== 'object' || Array.isArray(read)) fail(UNTYPED_DATA, 'must be a JSON object')
        else Object.assign(data, read)
      } else if (column.field !== null && cell !== '') {
        const read = cellValue(byField.get(column.field)!, cell)
        if ('problem' in read) fail(column.field, read.problem)
        else Object.defineProperty(data, column.field, { value: read.value, enumerable: true, writable: true, configurable: true })
      }
    })
    if (id === '') fail('id', 'is required (the record id)')
    else if (id.length > 1024) fail('id', 'must be at most 1024 characters')
    else if (seen.has(id)) fail('id', `repeats the id of line ${seen.get(id)}`)
    else seen.set(id, line)
    return { line, id, data: errors.length === 0 ? data : null, errors }
  })
  return { columns, lines }
}

/**
 * The records of a CSV text, each with the line it starts on. csv-parse's own line count takes a CRLF inside a quoted
 * cell for two lines; the line here counts the LFs before the record's first byte (after the empty lines it skips).
 */
function csvRows(text: string): { record: string[]; line: number }[] {
  const bytes = Buffer.from(text)
  let rows: { record: string[]; info: { bytes: number } }[]
  try {
    rows = parse(bytes, { info: true, relax_column_count: true, skip_empty_lines: true, bom: true }) as unknown as typeof rows
  } catch (error) {
    throw invalidCsv(`The body is not CSV (RFC 4180): ${(error as Error).message}`)
  }
  let [offset, line, end] = [0, 1, 0]
  return rows.map(({ record, info }) => {
    let start = end
    while (bytes[start] === 0x0a || bytes[start] === 0x0d) start++
    for (; offset < start; offset++) if (bytes[offset] === 0x0a) line++
    end = info.bytes
    return { record, line }
  })
}

function mapColumns(header: readonly string[], fields: readonly StoredField[]): ColumnMapping[] {
  const known = new Map<string, string>([['id', 'id'], ...(fields.length === 0 ? [[UNTYPED_DATA, 'json']] : fields.map((f) => [f.name, f.type])) as [string, string][]])
  const named = new Set<string>()
  const columns = header.map((raw): ColumnMapping => {
    const column = raw.trim()
    if (named.has(column)) throw invalidCsv(`The header repeats the column ${column}`, column)
    named.add(column)
    if ((READ_ONLY_COLUMNS as readonly string[]).includes(column)) return { column, field: null, type: null, ignored: 'read-only' }
    if (!known.has(column)) return { column, field: null, type: null, ignored: 'unknown' }
    // The record id's column is told apart from a field named id by its type (null).
    return { column, field: column, type: column === 'id' ? null : known.get(column)! }
  })
  if (!named.has('id')) throw invalidCsv('The header has no id column (the record id)', 'id')
  return columns
}

/** A cell the export guarded (`'=1+1`) as it was written. */
const unguard = (cell: string) => (GUARDED.test(cell) ? cell.slice(1) : cell)

function readJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

const NUMBER = /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/

/** A non-empty cell as a value of `field`'s type (the schema then judges it), or why it cannot be one. */
export function cellValue(field: StoredField, cell: string): { value: unknown } | { problem: string } {
  switch (field.type) {
    case 'number':
    case 'integer': {
      const value = NUMBER.test(cell.trim()) ? Number(cell.trim()) : Number.NaN
      const fits = field.type === 'integer' ? Number.isSafeInteger(value) : Number.isFinite(value)
      return fits ? { value } : { problem: `must be ${field.type === 'integer' ? 'an integer' : 'a number'}` }
    }
    case 'boolean':
      return cell === 'true' ? { value: true } : cell === 'false' ? { value: false } : { problem: 'must be true or false' }
    case 'multiselect': {
      if (!cell.startsWith('[')) return { value: cell.split(';') }
      const value = readJson(cell)
      return Array.isArray(value) ? { value } : { problem: 'must be values joined by ; or a JSON array' }
    }
    case 'json': {
      const value = readJson(cell)
      return value === undefined ? { problem: 'must be JSON' } : { value }
    }
    default:
      return { value: cell }
  }
}

/** A record problem's JSON pointer (`/status`) as the column it came from (`status`). */
export const columnOfPointer = (field: string, fields: readonly StoredField[]): string =>
  fields.find((f) => pointer(f.name) === field)?.name ?? (fields.length === 0 ? UNTYPED_DATA : field.replace(/^\//, ''))
