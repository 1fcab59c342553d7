/**
 * A collection's records as CSV, as the routes (./index.ts) run them (docs/records.md "CSV export and import"): the
 * export streams the list's records (same filters and sort, ./query.ts) a page at a time; the import writes each
 * valid line through `upsertRecord`, the one write of a record. The format: ./csv.ts.
 */
import { read } from '../../db/read.ts'
import { pageRecordList, type RecordListRow, type RecordScope } from '../../db/records.ts'
import type { Store } from '../../db/store.ts'
import { write } from '../../db/write.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import type { Clock } from '../../lib/clock.ts'
import { forbidden, HttpError, notFound } from '../../lib/errors.ts'
import { callerProject, requireCallerScope } from '../auth/service.ts'
import { collectionWriter, findCollection, mayReadCollection, requireEnvironment } from '../directory/projects.ts'
import { authorizeRead, type RecordPlace, readableCollection, recordBody } from './calls.ts'
import { type ColumnMapping, columnOfPointer, type CsvRecordLine, csvHeaderLine, type LineError, parseRecordsCsv, recordCsvLine } from './csv.ts'
import { type ImportOptions, type Query, recordListPlan } from './query.ts'
import { collectionFields, upsertRecords } from './service.ts'

/** Records read per page of an export: the memory an export holds whatever the collection's size. */
export const EXPORT_PAGE = 1000
/** Lines written per transaction of an import that is not all-or-nothing. */
export const IMPORT_BATCH = 1000
/** The most line errors an import lists (`invalid` counts them all). */
export const MAX_LISTED_ERRORS = 1000

/**
 * The CSV of a collection's records the caller may read, filtered and sorted as the list: a stream that reads one
 * page of `EXPORT_PAGE` records each time the client takes the last one (keyset paging, never the whole collection
 * at once). A bad parameter is 400 before the first byte.
 */
export async function exportRecordsAs(store: Store, caller: AccountCaller, place: RecordPlace, query: Query): Promise<ReadableStream<Uint8Array>> {
  await authorizeRead(store, caller, place.projectName)
  const scope = await read(store, readableCollection(caller, place))
  const fields = await read(store, collectionFields(scope.collectionId, 'read'))
  const plan = recordListPlan(query, fields)
  const encoder = new TextEncoder()
  let last: RecordListRow | undefined
  let started = false
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const rows = await read(store, pageRecordList(scope, plan.query(last && { key: last.key, id: last.id }), EXPORT_PAGE))
      const page = rows.slice(0, EXPORT_PAGE)
      const text = (started ? '' : csvHeaderLine(fields)) + page.map((row) => recordCsvLine(fields, recordBody(row))).join('')
      started = true
      last = page.at(-1)
      if (text !== '') controller.enqueue(encoder.encode(text))
      if (rows.length <= EXPORT_PAGE) controller.close()
    },
  })
}

/** What an import did (or, dry, would do). */
export interface ImportReport {
  dryRun: boolean
  allOrNothing: boolean
  /** Every column of the header, mapped. */
  columns: ColumnMapping[]
  unknownColumns: string[]
  lines: number
  created: number
  updated: number
  unchanged: number
  invalid: number
  /** Whether anything was written: false for a dry run and an all-or-nothing import with a bad line. */
  written: boolean
  /** The first `MAX_LISTED_ERRORS` line errors, by line. */
  errors: LineError[]
}

/** Carries an import's report out of a transaction it rolls back (a dry run, an all-or-nothing import with a bad line). */
class RolledBack extends Error {
  constructor(readonly report: ImportReport) {
    super('import rolled back')
  }
}

/**
 * Imports a CSV text into a collection as the caller (scope `records:write`; a member whose team may edit the
 * collection, project admins): every valid line upserted by its id, in order. Without `allOrNothing` a transaction
 * per `IMPORT_BATCH` lines, each line written whole or not at all; with it (and for a dry run, which then rolls
 * back) the whole file in one transaction, written only if no line is bad (422 `import_refused` otherwise, with the
 * report). An unknown column is refused (400) except in a dry run, which reports it. `body` gives the CSV text once the
 * caller may write (415 when it is not CSV).
 */
export async function importRecordsAs(store: Store, clock: Clock, caller: AccountCaller, place: RecordPlace, options: ImportOptions, body: () => string): Promise<ImportReport> {
  requireCallerScope(caller, 'records:write')
  await read(store, callerProject(caller, place.projectName))
  const target = await read(store, writableCollection(caller, place, options.teamName))
  const text = body()
  const fields = await read(store, collectionFields(target.collectionId, 'read'))
  const parsed = parseRecordsCsv(text, fields)
  const unknownColumns = parsed.columns.filter((c) => c.ignored === 'unknown').map((c) => c.column)
  if (unknownColumns.length > 0 && !options.dryRun) {
    throw new HttpError(400, 'invalid_csv', `The header names columns the collection has no field for: ${unknownColumns.join(', ')} (a dry run shows the mapping)`, {
      details: unknownColumns.map((column) => ({ field: column, message: "unknown column: the collection's schema has no such field" })),
    })
  }
  const report: ImportReport = {
    ...options, columns: parsed.columns, unknownColumns, lines: parsed.lines.length, created: 0, updated: 0, unchanged: 0, invalid: 0, written: false, errors: [],
  }
  delete (report as Partial<ImportOptions>).teamName
  const writeLines = (lines: readonly CsvRecordLine[], tally: ImportReport) =>
    function* () {
      // Read for writing once per transaction (held until it commits, as each record's write would hold it).
      const writeFields = yield* collectionFields(target.collectionId, 'write')
      for (let i = 0; i < lines.length; i += IMPORT_BATCH) {
        const slice = lines.slice(i, i + IMPORT_BATCH)
        const readable = slice.filter((line) => line.data !== null)
        const outcomes = yield* upsertRecords(clock, { ...target, via: 'by CSV import' }, readable.map((line) => ({ recordKey: line.id, data: line.data! })), writeFields)
        const byLine = new Map(readable.map((line, j) => [line, outcomes[j]!]))
        for (const line of slice) {
          const outcome = byLine.get(line)
          if (outcome && 'outcome' in outcome) {
            tally[outcome.outcome]++
            continue
          }
          const errors = outcome ? outcome.problems.map((p) => ({ line: line.line, field: columnOfPointer(p.field, writeFields), reason: p.message })) : line.errors
          tally.invalid++
          tally.errors.push(...errors.slice(0, Math.max(0, MAX_LISTED_ERRORS - tally.errors.length)))
        }
      }
    }
  if (options.dryRun || options.allOrNothing) {
    try {
      await write(store, function* () {
        // A retried transaction starts from zero: the counts are its own.
        const tally = { ...report, errors: [] as LineError[] }
        yield* writeLines(parsed.lines, tally)()
        if (options.dryRun || tally.invalid > 0) throw new RolledBack(tally)
        return tally
      }).then((tally) => Object.assign(report, tally, { written: true }))
    } catch (error) {
      if (!(error instanceof RolledBack)) throw error
      Object.assign(report, error.report)
      if (!options.dryRun) throw new HttpError(422, 'import_refused', `${report.invalid} of ${report.lines} lines cannot be written: nothing was written (allOrNothing)`, { ...report })
    }
    return report
  }
  for (let i = 0; i < parsed.lines.length; i += IMPORT_BATCH) {
    const batch = await write(store, function* () {
      const tally = { ...report, created: 0, updated: 0, unchanged: 0, invalid: 0, errors: [] as LineError[] }
      yield* writeLines(parsed.lines.slice(i, i + IMPORT_BATCH), tally)()
      return tally
    })
    for (const key of ['created', 'updated', 'unchanged', 'invalid'] as const) report[key] += batch[key]
    report.errors.push(...batch.errors.slice(0, Math.max(0, MAX_LISTED_ERRORS - report.errors.length)))
  }
  report.written = report.created + report.updated > 0
  return report
}

type WriteTarget = RecordScope & { userId: number; teamId: number | null; tokenId: number | null }

/** The collection the path names and the team the caller writes it as: 404 unless they may read it, 403 unless they may write it. */
function* writableCollection(caller: AccountCaller, place: RecordPlace, teamName: string | undefined) {
  const { project, environment } = yield* requireEnvironment(place.projectName, place.environmentName)
  const collection = yield* findCollection(project.id, place.collectionName)
  const who = { userId: caller.user.id, projectId: project.id, collectionId: collection?.id ?? 0 }
  if (!collection || !(yield* mayReadCollection(who))) throw notFound(`Collection ${place.collectionName} not found in project ${project.name}`)
  const granted = yield* collectionWriter({ ...who, ...(teamName === undefined ? {} : { teamName }) })
  if (granted === null) {
    throw forbidden(teamName === undefined ? `No team of yours may write the records of ${collection.name}` : `You may not write the records of ${collection.name} as team ${teamName}`)
  }
  return { environmentId: environment.id, collectionId: collection.id, userId: caller.user.id, teamId: granted.teamId, tokenId: caller.token?.tokenId ?? null } satisfies WriteTarget
}
