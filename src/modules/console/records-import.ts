/**
 * Console: a collection's records as CSV (docs/records.md "CSV export and import") — the export link and the import
 * page of a team's collection view. The page's script (src/console/assets/records-import.js) reads the chosen file,
 * previews it with the API's dry run (the column mapping, the counts, the bad lines), then imports it through the
 * same API route as `trellis records import`, in chunks of whole records with a progress bar, or in one request when
 * "all or nothing" is ticked. The writes are the API's: its schema check, its writers rule, its activity entries.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html, path } from '../../console/html.ts'
import { layout } from '../../console/page.ts'
import { read } from '../../db/read.ts'
import { forbidden } from '../../lib/errors.ts'
import { collectionFields } from '../records/service.ts'
import { csvColumns } from '../records/csv.ts'
import { readableCollection } from './access.ts'
import { placeCrumbs } from './links.ts'
import { consolePage, renderingPath } from './page.ts'

export const RECORDS_IMPORT_ASSETS = { scripts: ['/console/records-import.js'] }

interface CollectionView {
  project: { name: string }
  environment: { name: string }
  team: { name: string }
  collection: { name: string }
}

/** The API's CSV address of a collection in an environment. */
const csvPath = (view: CollectionView) => `${path('v1', 'project', view.project.name, 'environment', view.environment.name, 'collection', view.collection.name)}/records.csv`

/**
 * The collection page's line: export the records as CSV (`filters`: the list's own API parameters, so that a filtered,
 * sorted page exports those records in that order); import a CSV (the import page says who may).
 */
export function csvLinks(view: CollectionView, filters: Record<string, string | undefined> = {}) {
  const importPage = renderingPath(view.project.name, view.environment.name, view.team.name, 'c', view.collection.name, 'import')
  const kept = new URLSearchParams(Object.entries(filters).filter((entry): entry is [string, string] => entry[0] !== 'cursor' && entry[1] !== undefined && entry[1] !== ''))
  const exported = kept.size > 0 ? `${csvPath(view)}?${kept}` : csvPath(view)
  return html`<p class="csv-links"><a href="${exported}" download="${`${view.collection.name}.csv`}">Export CSV</a> · <a href="${importPage}">Import CSV</a></p>`
}

export function recordImportPages(deps: AppDeps) {
  return new Elysia({ name: 'console-records-import', detail: { hide: true } }).get(
    '/p/:project/e/:environment/t/:team/c/:collection/import',
    consolePage(deps, async ({ user, params }) => {
      const view = await read(deps.store, readableCollection(user, params))
      if (!view.access.edit) throw forbidden(`Team ${view.team.name} may not edit ${view.collection.name}`, 'collection_forbidden')
      const columns = csvColumns(await read(deps.store, collectionFields(view.collection.id, 'read')))
      return layout({
        title: `Import ${view.collection.name}`,
        user,
        assets: RECORDS_IMPORT_ASSETS,
        crumbs: placeCrumbs({ project: view.project.name, environment: view.environment.name, team: view.team.name, collection: view.collection.name }),
        body: html`<p>A CSV file whose first line names the columns: <code>${columns.join(',')}</code> (<code>createdAt</code> and <code>updatedAt</code> are ignored).
Each line replaces the record with its id, as team ${view.team.name}. Cells are read as their field's type (numbers, <code>true</code>/<code>false</code>, a multiselect as <code>a;b</code>); an empty cell is no value. The export of this collection is in this format.</p>
<form id="csv-import" action="${csvPath(view)}" data-team="${view.team.name}">
<label>CSV file <input type="file" name="file" accept=".csv,text/csv" required></label>
<label class="checkbox"><input type="checkbox" name="allOrNothing"> All or nothing: write no line if one is bad</label>
<p class="form-error" role="alert"></p>
<button type="submit" name="preview" value="1">Preview</button> <button type="submit" name="import" value="1" disabled>Import</button>
</form>
<progress id="import-progress" max="1" value="0" hidden></progress>
<p id="import-status" role="status" aria-live="polite"></p>
<section id="import-report" hidden>
<h2>Columns</h2>
<div class="table-scroll" tabindex="0"><table id="import-columns"><thead><tr><th>Column</th><th>Field</th><th>Type</th></tr></thead><tbody></tbody></table></div>
<h2>Lines that cannot be written</h2>
<p id="import-no-errors" class="muted">None.</p>
<div class="table-scroll" tabindex="0"><table id="import-errors"><thead><tr><th>Line</th><th>Column</th><th>Reason</th></tr></thead><tbody></tbody></table></div>
</section>`,
      })
    }),
  )
}
