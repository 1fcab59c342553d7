/**
 * Console: a collection's schema editor (docs/records.md "In the console"), for whoever may manage the project. One
 * row per field; rows are added and removed in the page and the whole list is saved with
 * `PUT /v1/project/{p}/collections/{c}/schema`, whose answer (the records the new schema refuses) is shown.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html, type Html, path } from '../../console/html.ts'
import { layout } from '../../console/page.ts'
import { read } from '../../db/read.ts'
import { requireProjectManager } from '../auth/service.ts'
import { requireCollection } from '../directory/projects.ts'
import { FIELD_TYPES, type SchemaField } from '../records/schema.ts'
import { projectCollections, readCollectionSchema } from '../records/service.ts'
import type { ConsoleUser } from './access.ts'
import { consolePage, projectPath } from './page.ts'

const asCaller = (user: ConsoleUser) => ({ user, viaSso: user.viaSso, tokenProjectId: null, token: null })

/** A field's default as its row shows it: text as it is, any other value as JSON. */
const defaultText = (value: unknown) => (value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value))

/** One field's row (none: the template of a new one). */
function fieldRow(field: SchemaField | undefined, collections: readonly string[]): Html {
  const checked = (on: boolean | undefined) => (on ? html` checked` : '')
  return html`<fieldset class="schema-row" data-row><legend>${field ? `Field ${field.name}` : 'New field'}</legend>
<label>Name <input name="name" required maxlength="64" value="${field?.name ?? ''}"></label>
<label>Type <select name="type">${FIELD_TYPES.map((t) => html`<option${t === field?.type ? html` selected` : ''}>${t}</option>`)}</select></label>
<label>Options <span class="hint">select and multiselect: the values, separated by commas</span><input name="options" data-type="list" value="${field?.options?.join(', ') ?? ''}"></label>
<label>Related collection <span class="hint">relation: the collection its ids name</span><select name="collection" data-optional><option value="">—</option>${collections.map((c) => html`<option${c === field?.collection ? html` selected` : ''}>${c}</option>`)}</select></label>
<label>Label <input name="label" data-optional maxlength="200" value="${field?.label ?? ''}"></label>
<label>Description <input name="description" data-optional maxlength="2000" value="${field?.description ?? ''}"></label>
<label>Default <span class="hint">read as the type: a number, true or false, JSON for multiselect and json</span><input name="default" data-type="field-default" value="${defaultText(field?.default)}"></label>
<label class="check"><input type="checkbox" name="required"${checked(field?.required)}> Required</label>
<label class="check"><input type="checkbox" name="indexed"${checked(field?.indexed)}> Indexed</label>
<button type="button" data-remove-row>Remove this field</button>
</fieldset>`
}

export function schemaEditorPages(deps: AppDeps) {
  return new Elysia({ name: 'console-schema-editor', detail: { hide: true } }).get(
    '/p/:project/settings/collections/:collection',
    consolePage(deps, async ({ user, params }) => {
      const { project, collection, schema, collections } = await read(deps.store, (function* () {
        const project = yield* requireProjectManager(asCaller(user), params.project!)
        const collection = yield* requireCollection(project.id, params.collection!)
        const schema = yield* readCollectionSchema(project.id, collection.id)
        const collections = (yield* projectCollections(project.id)).map((c) => c.name)
        return { project, collection, schema, collections }
      })())
      return layout({
        title: `Schema · ${collection.name}`,
        user,
        crumbs: [{ label: 'Projects', href: '/' }, { label: project.name, href: projectPath(project.name) }, { label: 'Settings', href: projectPath(project.name, 'settings') }],
        body: html`<p>The fields of <strong>${collection.name}</strong>' records. No field: any JSON object is a record. Saving never changes an existing record: those the new schema refuses are counted below.</p>
<p class="muted" id="schema-version" data-refresh>${schema.version === 0 ? 'No schema saved yet.' : `Version ${schema.version}, saved ${schema.updatedAt}.`}</p>
<form id="schema-editor" data-api data-method="PUT" action="${path('v1', 'project', project.name, 'collections', collection.name, 'schema')}" data-show="#schema-report" data-show-field="nonConforming.count" data-done="Schema saved.">
<div id="schema-fields" data-rows="fields" data-template="schema-row-template" data-refresh>${schema.fields.map((f) => fieldRow(f, collections))}</div>
<p><button type="button" data-add-row="#schema-fields">Add a field</button></p>
<p class="form-error" role="alert"></p>
<button type="submit">Save schema</button>
</form>
<template id="schema-row-template">${fieldRow(undefined, collections)}</template>
<div id="schema-report" class="once" role="status" hidden><p>Existing records this schema refuses: <strong class="value"></strong></p><p class="mono" data-field="nonConforming.ids"></p></div>`,
      })
    }),
  )
}
