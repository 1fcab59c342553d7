/**
 * Console: a team's view of an environment — its collections and workflows, a collection's records, one record
 * with its notes, runs and history. Every page that shows record data writes a `type: "read"` activity entry
 * (`index` for a list, `read` for one record) in the same transaction that reads the data.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import { html, type Html, path, scrollingTable } from '../../console/html.ts'
import { notFound } from '../../lib/errors.ts'
import { inIdOrder } from '../../lib/id-order.ts'
import { listActivityLogIds, renderActivityLogs } from '../activity-logs/service.ts'
import { listNoteIds, renderNotes } from '../notes/service.ts'
import { collectionAccess } from '../directory/projects.ts'
import { collectionFields, findRecord, listMatchingRecords, listRecords, logRecordView, projectCollections, readCollectionSchema, renderingWorkflows } from '../records/service.ts'
import { recordListPage } from '../records/query.ts'
import type { SchemaField } from '../records/schema.ts'
import { asHttpError } from '../../http/errors.ts'
import { listQuery, recordsApiPath, typedRecordForm, typedRecordList, typedRecordView } from './typed-records.ts'
import { listRunIds, renderRuns } from '../runs/service.ts'
import { reachableRendering, readableCollection } from './access.ts'
import { listTaskIds } from '../tasks/service.ts'
import { loadTasksToRender } from '../../db/tasks.ts'
import { tasksTable } from './tasks.ts'
import { activityTable, notesList } from './logs.ts'
import { environmentEventsPath, runsTable } from './runs.ts'
import { AUTHORING_ASSETS, newWorkflowForm } from './workflow-authoring.ts'
import { placeCrumbs, workflowPlaces } from './links.ts'
import { parseRecordSearch, recordSearchForm } from './search.ts'
import { csvLinks } from './records-import.ts'
import { layout } from '../../console/page.ts'
import { consolePage, projectPath, renderingPath } from './page.ts'
import { filterOp } from '../../db/op.ts'
import { read, readListed } from '../../db/read.ts'

const RECORDS_PER_PAGE = 50
/** How many ids a relation input suggests at once. */
const RELATION_SUGGESTIONS = 20

/** The start of a record's JSON, for the list. */
const preview = (data: string) => (data.length > 160 ? `${data.slice(0, 160)}…` : data)

/**
 * Whoever may edit the collection through the page's team adds or replaces a record: its id goes into the address
 * (encoded), its data must be a JSON object (checked before sending, and by the API), and the activity entry names
 * this team.
 */
function recordForm(view: { project: { name: string }; environment: { name: string }; team: { name: string }; collection: { name: string } }) {
  const action = `${path('v1', 'project', view.project.name, 'environment', view.environment.name, 'collection', view.collection.name, 'records')}/{recordId}`
  return html`<h2>Add or replace a record</h2>
<form id="put-record" data-api data-method="PUT" action="${action}" data-done="Record saved.">
<label>Record id <input data-path="recordId" required maxlength="1024"></label>
<input type="hidden" name="teamName" value="${view.team.name}">
<label>Data (a JSON object) <textarea name="data" data-type="json-object" rows="6" required>{}</textarea></label>
<p class="form-error" role="alert"></p>
<button type="submit">Save record</button>
</form>`
}

type CollectionView = { project: { name: string }; environment: { name: string }; team: { name: string }; collection: { name: string } }

/** The records API of the page's place. */
const apiOf = (view: CollectionView) => recordsApiPath({ project: view.project.name, environment: view.environment.name, collection: view.collection.name })
/** Where a relation input of this team's pages finds its suggestions. */
const idsPathOf = (view: CollectionView) => (collection: string) => renderingPath(view.project.name, view.environment.name, view.team.name, 'c', collection, 'ids')

/**
 * A typed collection's forms: a new record (its id and fields) for whoever may edit it through the page's team, and,
 * for project admins, the restore of a deleted record by its id.
 */
function typedWriterForms(view: CollectionView & { isAdmin: boolean; access: { edit: boolean } }, fields: SchemaField[]): Html {
  const newRecord = view.access.edit
    ? html`<h2>New record</h2>
${typedRecordForm({ id: 'new-record', action: `${apiOf(view)}/{recordId}`, teamName: view.team.name, fields, done: 'Record saved.', idsPath: idsPathOf(view) })}`
    : html``
  return view.isAdmin ? html`${newRecord}${restoreForm(view)}` : newRecord
}

function restoreForm(view: CollectionView): Html {
  return html`<h2>Restore a deleted record</h2>
<form id="restore-record" data-api action="${apiOf(view)}/{recordId}/restore" data-done="Record restored.">
<label>Record id <input data-path="recordId" required maxlength="1024"></label>
<p class="form-error" role="alert"></p>
<button type="submit">Restore</button>
</form>`
}

export function recordPages(deps: AppDeps) {
  const crumbsFor = (p: Record<string, string>, upTo: { collection?: boolean; record?: boolean } = {}) =>
    placeCrumbs({ project: p.project!, environment: p.environment!, team: p.team!, ...(upTo.collection ? { collection: p.collection! } : {}), ...(upTo.record ? { record: p.record! } : {}) })

  return new Elysia({ name: 'console-records', detail: { hide: true } })
    .get(
      '/p/:project/e/:environment/t/:team',
      consolePage(deps, async ({ user, params }) => {
        const { project, environment, team, isAdmin } = await read(deps.store, reachableRendering(user, params))
        const readable = await read(deps.store, readableCollections(user.id, project.id, team.id))
        const flows = await read(deps.store, renderingWorkflows(environment.id, team.id))
        const collections = isAdmin ? await read(deps.store, projectCollections(project.id)) : []
        const at = (...rest: string[]) => renderingPath(project.name, environment.name, team.name, ...rest)
        return layout({
          title: `${team.name} in ${environment.name}`,
          user,
          assets: isAdmin ? AUTHORING_ASSETS : undefined,
          crumbs: crumbsFor(params),
          body: html`<h2>Collections</h2>
${readable.length === 0 ? html`<p class="muted">This team may read no collection.</p>` : html`<ul>${readable.map((c) => html`<li><a href="${at('c', c.name)}">${c.name}</a></li>`)}</ul>`}
<h2 id="workflows">Workflows</h2>
${
  flows.length === 0
    ? html`<p class="muted">No workflow for this team in this environment.</p>`
    : scrollingTable(html`<table><thead><tr><th>Workflow</th><th>Collection</th><th>State</th>${isAdmin ? html`<th>Actions</th>` : ''}</tr></thead><tbody>
${flows.map((w) => html`<tr><td>${isAdmin ? html`<a href="${at('w', w.name)}">${w.name}</a>` : w.name}</td><td>${w.collectionName}</td><td>${w.activeVersionId === null ? 'withdrawn' : 'active'}</td>${isAdmin ? html`<td><a href="${at('w', w.name)}">Steps, versions, settings</a></td>` : ''}</tr>`)}
</tbody></table>`)
}
${isAdmin ? newWorkflowForm({ project: project.name, environment: environment.name, team: team.name }, collections) : ''}`,
        })
      }),
    )
    .get(
      '/p/:project/e/:environment/t/:team/c/:collection',
      consolePage(deps, async ({ user, params, query }) => {
        const after = query.after === undefined || query.after === '' ? undefined : query.after.slice(0, 1024)
        const search = parseRecordSearch(query)
        const { rows, view, fields, listed, filterError } = await write(deps.store, function* () {
          const view = yield* readableCollection(user, params)
          const scope = { environmentId: view.environment.id, collectionId: view.collection.id }
          const { fields } = yield* readCollectionSchema(view.project.id, view.collection.id)
          let listed: { nextCursor?: string; sort: string } | undefined
          let rows: { recordKey: string; data: string; updatedAt: number }[] = []
          let filterError: string | undefined
          if (fields.length > 0) {
            // The records API's own list: its filters, sort and cursor; a bad filter is said beside the form.
            try {
              const page = yield* recordListPage(scope, yield* collectionFields(view.collection.id, 'read'), listQuery(query, fields), RECORDS_PER_PAGE)
              ;[listed, rows] = [page, page.rows]
            } catch (caught) {
              const error = asHttpError(caught)
              if (error?.status !== 400) throw caught
              filterError = error.message
            }
          } else {
            rows = search ? yield* listMatchingRecords(scope, search, after, RECORDS_PER_PAGE) : yield* listRecords(scope, after, RECORDS_PER_PAGE)
          }
          yield* logRecordView(deps.clock, {
            environmentId: view.environment.id,
            collectionId: view.collection.id,
            userId: user.id,
            teamId: view.team.id,
            action: 'index',
            recordIds: rows.slice(0, RECORDS_PER_PAGE).map((r) => r.recordKey),
          })
          return { rows, view, fields, listed, filterError }
        })
        const shown = rows.slice(0, RECORDS_PER_PAGE)
        const at = (...rest: string[]) => renderingPath(view.project.name, view.environment.name, view.team.name, 'c', view.collection.name, ...rest)
        if (fields.length > 0) {
          const recordHref = (collection: string, id: string) => renderingPath(view.project.name, view.environment.name, view.team.name, 'c', collection, 'r', id)
          return layout({
            title: view.collection.name,
            user,
            crumbs: crumbsFor(params, { collection: true }),
            body: html`${csvLinks(view, listQuery(query, fields))}${typedRecordList({ fields, query, rows: shown, listed, filterError, pagePath: at(), recordHref })}${typedWriterForms(view, fields)}`,
          })
        }
        const next = new URLSearchParams({ ...(query.q ? { q: query.q } : {}), ...(query.field ? { field: query.field, value: query.value! } : {}), after: shown.at(-1)?.recordKey ?? '' })
        const more = rows.length > RECORDS_PER_PAGE ? html`<p class="pager"><a href="${`${at()}?${next}`}">Next →</a></p>` : ''
        return layout({
          title: view.collection.name,
          user,
          crumbs: crumbsFor(params, { collection: true }),
          body: html`${recordSearchForm(query)}${csvLinks(view)}${
            shown.length === 0
              ? html`<p class="muted">No records${search ? ' match this search' : ''}${after === undefined ? '' : ' after this one'}.</p>`
              : scrollingTable(html`<table><thead><tr><th>Record id</th><th>Data</th></tr></thead><tbody>
${shown.map((r) => html`<tr><td><a class="mono record-link" href="${at('r', r.recordKey)}">${r.recordKey}</a></td><td class="mono">${preview(r.data)}</td></tr>`)}
</tbody></table>`)
          }${more}${view.access.edit ? recordForm(view) : ''}`,
        })
      }),
    )
    .get(
      '/p/:project/e/:environment/t/:team/c/:collection/ids',
      consolePage(deps, async ({ user, params, query }) => {
        // A relation input's suggestions: ids of the collection containing what was typed (the team must read it).
        const typed = (query.q ?? '').slice(0, 1024)
        const ids = await write(deps.store, function* () {
          const view = yield* readableCollection(user, params)
          const scope = { environmentId: view.environment.id, collectionId: view.collection.id }
          const rows = (yield* listMatchingRecords(scope, typed === '' ? {} : { idContains: typed }, undefined, RELATION_SUGGESTIONS)).slice(0, RELATION_SUGGESTIONS)
          const ids = rows.map((r) => r.recordKey)
          yield* logRecordView(deps.clock, { ...scope, userId: user.id, teamId: view.team.id, action: 'index', recordIds: ids })
          return ids
        })
        return Response.json({ ids }, { headers: { 'cache-control': 'no-store' } })
      }),
    )
    .get(
      '/p/:project/e/:environment/t/:team/c/:collection/r/:record',
      consolePage(deps, async ({ user, params }) => {
        const { record, view, fields } = await write(deps.store, function* () {
          const view = yield* readableCollection(user, params)
          const record = yield* findRecord({ environmentId: view.environment.id, collectionId: view.collection.id }, params.record!)
          if (!record) throw notFound(`Record ${params.record} not found in ${view.collection.name}`)
          yield* logRecordView(deps.clock, {
            environmentId: view.environment.id,
            collectionId: view.collection.id,
            userId: user.id,
            teamId: view.team.id,
            action: 'read',
            recordIds: [record.recordKey],
          })
          return { record, view, fields: (yield* readCollectionSchema(view.project.id, view.collection.id)).fields }
        })
        const { project, environment, team, collection, isAdmin, access } = view
        const notes = await read(deps.store, renderNotes((await readListed(deps.store, 'notes', listNoteIds(project.id, environment.id, { recordId: record.recordKey, teamName: team.name, collectionName: collection.name }, [], 20))).slice(0, 20)))
        const flows = (await read(deps.store, renderingWorkflows(environment.id, team.id))).filter((w) => w.collectionId === collection.id && w.activeVersionId !== null)
        // Admins see every run on the record; others their own (as GET /v1/workflow-runs/{id} allows).
        const runIds = (await readListed(deps.store, 'runs', listRunIds(environment.id, { recordId: record.recordKey, ...(isAdmin ? {} : { userId: user.id }) }, [], 10))).slice(0, 10)
        // The record's tasks the person sees, as the tasks API shows them (admins: all; others: theirs to decide or of their runs).
        const taskIds = (await readListed(deps.store, 'tasks', listTaskIds(environment, { recordId: record.recordKey }, [], 10, { userId: user.id, admin: isAdmin }))).slice(0, 10)
        const tasks = inIdOrder(taskIds, await read(deps.store, loadTasksToRender(taskIds)), (task) => task.id)
        // Its history is what changed it (write entries): views, of the record or of a list naming it among others, are
        // in the activity log linked beside it.
        const history = isAdmin ? (await read(deps.store, renderActivityLogs((await readListed(deps.store, 'activity_logs', listActivityLogIds(project.id, environment.id, { recordId: record.recordKey, type: 'write', extensions: true }, [], 20))).slice(0, 20)))) : null
        const runsPath = `/v1/project/${encodeURIComponent(project.name)}/environment/${encodeURIComponent(environment.name)}/workflow-runs`
        const section = (title: string, id: string, content: Html) => html`<h2 id="${id}">${title}</h2>${content}`
        const places = await read(deps.store, workflowPlaces({ environmentId: environment.id }))
        const audit = (page: string) => `${projectPath(project.name, 'e', environment.name, page)}?recordId=${encodeURIComponent(record.recordKey)}`
        return layout({
          title: `${collection.name} ${record.recordKey}`,
          user,
          crumbs: crumbsFor(params, { collection: true, record: true }),
          body: html`<p class="record-nav"><a href="#runs">Runs</a> · <a href="#tasks">Tasks</a> · <a href="#notes">Notes</a>${history ? html` · <a href="#history">History</a> · <a href="${audit('runs')}">all runs</a> · <a href="${audit('activity')}">activity log</a>` : ''}</p>
${
  fields.length > 0 && access.edit
    ? html`${typedRecordForm({ id: 'edit-record', action: `${apiOf(view)}/${encodeURIComponent(record.recordKey)}`, teamName: team.name, fields, data: JSON.parse(record.data), done: 'Record saved.', idsPath: idsPathOf(view) })}
<form id="delete-record" class="inline" data-api data-method="DELETE" action="${`${apiOf(view)}/${encodeURIComponent(record.recordKey)}`}" data-next="${renderingPath(project.name, environment.name, team.name, 'c', collection.name)}" data-confirm="Delete record ${record.recordKey}? A project admin can restore it for a while." data-done="Record ${record.recordKey} deleted."><button type="submit" class="danger">Delete record</button> <span class="form-error" role="alert"></span></form>`
    : fields.length > 0
      ? typedRecordView(fields, JSON.parse(record.data), (target, id) => renderingPath(project.name, environment.name, team.name, 'c', target, 'r', id))
      : html`<pre class="mono" id="record-data">${JSON.stringify(JSON.parse(record.data), null, 2)}</pre>`
}
${section(
  'Workflows',
  'workflows',
  flows.length === 0
    ? html`<p class="muted">No active workflow of ${team.name} works on ${collection.name}.</p>`
    : html`${flows.map(
        (w) => html`<form class="inline" data-api action="${runsPath}" data-next="/runs/{runId}" data-done="Run of “${w.name}” started.">
<input type="hidden" name="workflowName" value="${w.name}"><input type="hidden" name="teamName" value="${team.name}"><input type="hidden" name="recordId" value="${record.recordKey}">
<button type="submit">Run “${w.name}”</button> <span class="form-error" role="alert"></span></form> `,
      )}`,
)}
${section('Runs on this record', 'runs', runsTable((await read(deps.store, renderRuns(runIds, deps.clock.now()))), places, environmentEventsPath(project.name, environment.name, record.recordKey)))}
${section('Tasks', 'tasks', tasks.length === 0 ? html`<p class="muted">No tasks on this record.</p>` : tasksTable(tasks, deps.clock.now(), false))}
${section(
  'Notes',
  'notes',
  html`${notesList(notes, renderingPath(project.name, environment.name, team.name))}
<form id="new-note" data-done="Note added." data-api action="${renderingPath(project.name, environment.name, team.name, 'c', collection.name, 'r', record.recordKey, 'notes')}">
<h3>New note</h3>
<label>Title <input name="title" required maxlength="500"></label>
<label>Message <textarea name="text" rows="4" required maxlength="10000"></textarea></label>
<p class="form-error" role="alert"></p>
<button type="submit">Add note</button></form>`,
)}
${history ? section('History', 'history', activityTable(history, { record: false })) : ''}`,
        })
      }),
    )
}

/** The project's collections the user may read as seen by the team. */
function* readableCollections(userId: number, projectId: number, teamId: number) {
  const collections = yield* projectCollections(projectId)
  return yield* filterOp(collections, function* (c) {
    return (yield* collectionAccess({ userId, projectId, teamId, collectionId: c.id })).read
  })
}
