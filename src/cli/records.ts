/**
 * `trellis records import|export`: a collection's records as CSV through a running server's API
 * (docs/command-line.md "Records as CSV"), as the token in TRELLIS_TOKEN. An import sends the file in chunks of
 * whole records, each chunk the header and up to CHUNK_LINES lines: every chunk is written (or refused) whole, the
 * valid lines of each land. `--all-or-nothing` sends the whole file in one request instead (at most the server's
 * 32 MiB), so that no line is written if one is bad. Progress on stderr: a bar on a terminal, a line per chunk elsewhere.
 */
import { createReadStream, statSync } from 'node:fs'
import { CSV_IMPORT_MAX_BYTES } from '../http/body.ts'
import type { ImportReport } from '../modules/records/csv-calls.ts'
import { BYTES } from '../lib/progress.ts'
import { booleanFlag, type Command, CommandError, configFrom, type Io, type Parsed, parseFlags, required, stringFlag, UsageError } from './command.ts'
import { progressOf, QUIET_FLAG } from './progress.ts'

/** Lines per request of an import that is not all-or-nothing. */
export const CHUNK_LINES = 5000
export const TOKEN_ENV = 'TRELLIS_TOKEN'

const USAGE = [
  'trellis records import --file F --project P --environment E --collection C [--team T] [--all-or-nothing] [--dry-run] [--json] [--url URL]',
  '       trellis records export --file F --project P --environment E --collection C [--query "status.eq=paid&sort=-amount"] [--url URL]',
].join('\n')

export const recordsCommand: Command = {
  summary: `import or export a collection's records as CSV through the running server (token in $${TOKEN_ENV})`,
  usage: USAGE,
  flags: {
    file: stringFlag('FILE', 'import: the CSV to read; export: the CSV to write'),
    project: stringFlag('NAME', 'the project'),
    environment: stringFlag('NAME', 'the environment'),
    collection: stringFlag('NAME', 'the collection'),
    team: stringFlag('NAME', 'import: the team the writes are made as (default: your first team that may edit the collection)'),
    'all-or-nothing': booleanFlag('import: one request for the whole file; nothing is written if a line is bad'),
    'dry-run': booleanFlag('import: check and report, write nothing'),
    query: stringFlag('PARAMS', 'export: filters and sort as the records list takes them'),
    json: booleanFlag('import: print the report as JSON'),
    url: stringFlag('URL', 'the server (default: the URL serve runs with, DIR/base-url)'),
    quiet: QUIET_FLAG,
  },
  async run(argv, io) {
    const [sub, ...rest] = argv
    const parsed = parseFlags(rest, this.flags)
    if (sub === 'import') return importFromCli(parsed, io)
    if (sub === 'export') return exportFromCli(parsed, io)
    throw new UsageError(sub ? `unknown subcommand "${sub}"` : 'a subcommand is required (import or export)')
  },
}

/** The collection's CSV address on the server and the token's header. */
function target(parsed: Parsed) {
  const token = process.env[TOKEN_ENV]
  if (!token) throw new UsageError(`set ${TOKEN_ENV} to a token of the project (scope records:write to import, records:read to export)`)
  const base = typeof parsed.values.url === 'string' ? parsed.values.url : configFrom(parsed, { servedBaseUrl: true }).baseUrl
  const path = ['project', required(parsed, 'project'), 'environment', required(parsed, 'environment'), 'collection', required(parsed, 'collection')]
  const url = new URL(`/v1/${path.map(encodeURIComponent).join('/')}/records.csv`, base)
  return { url, headers: { authorization: `Bearer ${token}` } }
}

/** The server's error body as one sentence. */
async function failure(response: Response): Promise<CommandError> {
  const text = await response.text()
  try {
    const body = JSON.parse(text) as { message?: string; details?: { field: string; message: string }[] }
    const details = (body.details ?? []).map((d) => `${d.field}: ${d.message}`).join('; ')
    return new CommandError(`${response.status} ${body.message ?? text}${details ? ` (${details})` : ''}`)
  } catch {
    return new CommandError(`${response.status} ${text.slice(0, 500)}`)
  }
}

/** The import report's fields the command sums over its chunks (the server answers the whole ImportReport). */
type Report = Omit<ImportReport, 'dryRun' | 'allOrNothing' | 'columns'>

/**
 * The file's header and then chunks of whole records: a line ends a record only when the quotes before it are
 * balanced (RFC 4180 doubles a quote inside a quoted cell), so a cell holding a line break is never cut. Each chunk
 * says the file line its first line is.
 */
async function* csvChunks(file: string, maxLines: number): AsyncGenerator<{ header: string; text: string; firstLine: number; bytes: number }> {
  let header: string | null = null
  let pending = ''
  let lines: string[] = []
  let record = ''
  let quotes = 0
  let lineNo = 0
  let firstLine = 2
  let bytes = 0
  const flush = () => {
    const chunk = { header: header!, text: lines.join(''), firstLine, bytes }
    firstLine = lineNo + 1
    lines = []
    return chunk
  }
  for await (const piece of createReadStream(file, { encoding: 'utf8' }) as AsyncIterable<string>) {
    bytes += Buffer.byteLength(piece)
    pending += piece
    for (let nl = pending.indexOf('\n'); nl !== -1; nl = pending.indexOf('\n')) {
      const line = pending.slice(0, nl + 1)
      pending = pending.slice(nl + 1)
      lineNo++
      record += line
      quotes += line.split('"').length - 1
      if (quotes % 2 !== 0) continue
      if (header === null) header = record
      else lines.push(record)
      record = ''
      quotes = 0
      if (lines.length >= maxLines) yield flush()
    }
  }
  if (pending !== '' || record !== '') {
    lineNo++
    if (header === null) header = `${record}${pending}\n`
    else lines.push(`${record}${pending}`)
  }
  if (header === null) throw new CommandError(`${file} is empty: its first line must name the columns`)
  if (lines.length > 0 || firstLine === 2) yield flush()
}

async function importFromCli(parsed: Parsed, io: Io): Promise<number> {
  const file = required(parsed, 'file')
  let size: number
  try {
    size = statSync(file).size
  } catch {
    throw new CommandError(`cannot read ${file}`)
  }
  const allOrNothing = parsed.values['all-or-nothing'] === true
  const dryRun = parsed.values['dry-run'] === true
  if (allOrNothing && size > CSV_IMPORT_MAX_BYTES) {
    throw new CommandError(`${file} is ${size} bytes: an all-or-nothing import is one request of at most ${CSV_IMPORT_MAX_BYTES} bytes (split the file, or import without --all-or-nothing)`)
  }
  const { url, headers } = target(parsed)
  if (allOrNothing) url.searchParams.set('allOrNothing', 'true')
  if (dryRun) url.searchParams.set('dryRun', 'true')
  if (typeof parsed.values.team === 'string') url.searchParams.set('teamName', parsed.values.team)

  const progress = progressOf(io, parsed, BYTES)
  const step = progress.step(`${dryRun ? 'checking' : 'importing'} ${file}`, size)
  const { update: sent } = step
  const total: Report = { lines: 0, created: 0, updated: 0, unchanged: 0, invalid: 0, written: false, unknownColumns: [], errors: [] }
  let refused = false
  try {
    for await (const chunk of csvChunks(file, allOrNothing ? Number.POSITIVE_INFINITY : CHUNK_LINES)) {
      const response = await fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'text/csv' }, body: chunk.header + chunk.text })
      let report: Report
      if (response.status === 200 || (response.status === 422 && allOrNothing)) {
        report = (await response.json()) as Report
        refused = response.status === 422
      } else throw await failure(response)
      for (const key of ['lines', 'created', 'updated', 'unchanged', 'invalid'] as const) total[key] += report[key]
      total.written ||= report.written
      total.unknownColumns = report.unknownColumns
      // The server numbers the chunk's lines from its header (line 1): back to the file's.
      total.errors.push(...report.errors.map((e) => ({ ...e, line: e.line - 2 + chunk.firstLine })))
      sent(chunk.bytes)
      if (!parsed.values.quiet && !io.progress.isTTY && !allOrNothing) {
        io.progress.write(`lines ${chunk.firstLine}…: ${total.lines} records read, ${chunk.bytes} of ${size} bytes\n`)
      }
    }
    step.done(size)
    progress.finish(dryRun ? 'checked' : 'imported')
  } catch (error) {
    progress.abandon()
    throw error
  }
  if (parsed.values.json === true) io.out(JSON.stringify({ ...total, dryRun, allOrNothing, refused }, null, 2))
  else {
    for (const e of total.errors) io.out(`line ${e.line}: ${e.field}: ${e.reason}`)
    if (total.unknownColumns.length > 0) io.out(`unknown columns: ${total.unknownColumns.join(', ')}`)
    const would = dryRun ? 'would be ' : ''
    const counts = `${total.lines} lines: ${total.created} ${would}created, ${total.updated} ${would}updated, ${total.unchanged} unchanged, ${total.invalid} invalid`
    io.out(counts + (refused ? '; nothing was written (all or nothing)' : ''))
  }
  return total.invalid > 0 || refused ? 1 : 0
}

async function exportFromCli(parsed: Parsed, io: Io): Promise<number> {
  const file = required(parsed, 'file')
  const { url, headers } = target(parsed)
  if (typeof parsed.values.query === 'string') url.search = parsed.values.query
  const response = await fetch(url, { headers })
  if (response.status !== 200 || !response.body) throw await failure(response)
  const progress = progressOf(io, parsed, BYTES)
  const step = progress.step(`exporting to ${file}`, null)
  const { update: received } = step
  const writer = Bun.file(file).writer()
  let bytes = 0
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      writer.write(chunk)
      bytes += chunk.byteLength
      received(bytes)
    }
    await writer.end()
    step.done(bytes)
    progress.finish('exported')
  } catch (error) {
    progress.abandon()
    throw new CommandError(`export failed: ${(error as Error).message}`)
  }
  io.out(`${file} (${bytes} bytes)`)
  return 0
}
