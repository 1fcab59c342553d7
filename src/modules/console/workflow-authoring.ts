/**
 * Console: authoring a workflow — the "New workflow" form of a team's page, and on the workflow's page its
 * steps in words, the JSON editor that publishes through `PUT …/workflows/{name}` (src/console/assets/editor.js
 * shows the API's errors beside their lines), its versions with a line diff between any two, a test run on a chosen
 * record (the manual-run API) and its recent runs. The definition is checked once, by the API, against the one schema.
 * Beside the JSON, a visual builder (src/console/assets/builder.js) edits the same text step by step: it is given the
 * API's step schemas themselves (so each field is checked by the rule the API applies), the collections' fields,
 * the project's teams and members, and the dry-run API that shows what each step would do on a record.
 */
import type { TSchema } from '@sinclair/typebox'
import { html, type Html, path, scrollingTable } from '../../console/html.ts'
import { ruleOf } from '../../lib/validation.ts'
import { RECORD_ID_MAX_LENGTH } from '../records/service.ts'
import { type DiffLine, lineDiff } from '../../lib/line-diff.ts'
import { type Step, STEP_SCHEMAS, STEP_TYPES, type StepType, TEMPLATE_VARIABLE, type WorkflowDefinition } from '../workflows/definition.ts'
import type { WorkflowVersionView } from '../workflows/service.ts'
import { renderingPath, when } from './page.ts'

/** Where a rendering's workflow lives in the API and in the console. */
export interface WorkflowPlace {
  project: string
  environment: string
  team: string
}

export const workflowApi = (place: WorkflowPlace, name: string) => path('v1', 'project', place.project, 'environment', place.environment, 'team', place.team, 'workflows', name)
export const workflowPagePath = (place: WorkflowPlace, name: string) => renderingPath(place.project, place.environment, place.team, 'w', name)

/** The scripts and styles of the authoring pages, beside the console's own. */
export const AUTHORING_ASSETS = { scripts: ['/console/editor.js', '/console/builder.js'], styles: ['/console/editor.css'] }

/**
 * The definition as the editor shows it and the diff compares it: the PUT body (collection, concurrency, steps; the
 * path names the rest, trigger settings are not versioned), each step's `type` and `name` first, two-space JSON.
 */
export function editableDefinition(definition: WorkflowDefinition): string {
  const steps = definition.steps.map(({ type, name, ...rest }) => ({ type, ...(name === undefined ? {} : { name }), ...rest }))
  const concurrency = definition.concurrency === undefined || definition.concurrency === null ? {} : { concurrency: definition.concurrency }
  return JSON.stringify({ collection: definition.collection, ...concurrency, steps }, null, 2)
}

/** The team page's form: a name and a collection make version 1, one `load` step, then the workflow's page opens. */
export function newWorkflowForm(place: WorkflowPlace, collections: { name: string }[]): Html {
  if (collections.length === 0) return html`<p class="muted">Add a collection in the project's settings before creating a workflow.</p>`
  return html`<h3>New workflow</h3>
<form id="new-workflow" data-new-workflow action="${workflowApi(place, '')}" data-next="${workflowPagePath(place, '')}">
<label>Name <input name="workflowName" required maxlength="200" autocomplete="off"></label>
<label>Collection <select name="collection">${collections.map((c) => html`<option>${c.name}</option>`)}</select></label>
<p class="muted">It starts as version 1 with one step, loading the record; edit its steps on its page.</p>
<p class="form-error" role="alert"></p>
<button type="submit">Create workflow</button>
</form>`
}

const json = (value: unknown) => html`<code>${JSON.stringify(value)}</code>`

function waitText(seconds: number): string {
  const parts: [number, string][] = [[86_400, 'd'], [3600, 'h'], [60, 'min'], [1, 's']]
  let left = seconds
  const out: string[] = []
  for (const [size, unit] of parts) {
    if (left >= size) {
      out.push(`${Math.floor(left / size)} ${unit}`)
      left %= size
    }
  }
  return out.join(' ')
}

function conditionText(step: Extract<Step, { type: 'condition' }>): Html {
  const { field, equals, notEquals, exists } = step.if
  const test =
    equals !== undefined
      ? html`equals ${json(equals)}`
      : notEquals !== undefined
        ? html`does not equal ${json(notEquals)}`
        : step.if.in !== undefined
          ? html`is one of ${json(step.if.in)}`
          : html`${exists === false ? 'is absent' : 'is present'}`
  return html`Go on only if <code>${field}</code> ${test}; otherwise ${step.else === 'fail' ? 'fail the run' : 'end the run (succeeded)'}`
}

/** One step in words, per type. Header values are not shown (they may hold credentials): the editor has them. */
function stepText(step: Step): Html {
  switch (step.type) {
    case 'load':
      return html`Load the record`
    case 'condition':
      return conditionText(step)
    case 'update':
      return html`Set ${Object.entries(step.set).map(([field, value], i) => html`${i > 0 ? ', ' : ''}<code>${field}</code> = ${json(value)}`)}`
    case 'note':
      return html`Add a note “${step.title}”: <span class="muted">${step.content.length > 200 ? `${step.content.slice(0, 200)}…` : step.content}</span>`
    case 'http':
      return html`Call <code>${step.method} ${step.url}</code>${step.headers ? html` with headers ${Object.keys(step.headers).join(', ')}` : ''}${step.body === undefined ? '' : ' and a body'}; timeout ${step.timeoutSeconds ?? 30} s, ${step.retries ?? 0} retries`
    case 'wait':
      return html`Wait ${waitText(step.seconds)}`
    case 'task':
      return html`Ask ${peopleText(step.assignees)} “${step.title}”${(step.approvals ?? 1) > 1 ? ` (${step.approvals} approvals)` : ''}${step.form ? ' with a form' : ''}; when rejected ${step.onReject === 'end' ? 'end the run' : step.onReject === 'continue' ? 'go on' : 'fail the run'}`
  }
}

function peopleText(people: { teams?: string[]; users?: string[] }): string {
  return [...(people.teams ?? []).map((team) => `team ${team}`), ...(people.users ?? [])].join(', ')
}

export function stepsList(definition: WorkflowDefinition): Html {
  return html`<ol class="steps-list">${definition.steps.map((step) => html`<li><span class="step-type">${step.type}</span>${step.name ? html` <strong>${step.name}</strong>` : ''} — ${stepText(step)}</li>`)}</ol>`
}

/** What "Add a step" appends, per type: a valid step to change (typed by the step schemas). */
export const STEP_TEMPLATES: { [K in StepType]: Extract<Step, { type: K }> } = {
  load: { type: 'load' },
  condition: { type: 'condition', if: { field: 'status', equals: 'paid' }, else: 'end' },
  update: { type: 'update', set: { status: 'done' } },
  note: { type: 'note', title: 'Checked', content: 'Checked by {{workflow.name}} at {{now}}' },
  http: { type: 'http', method: 'POST', url: 'https://example.com/hook', body: { recordId: '{{record.id}}' }, timeoutSeconds: 10 },
  wait: { type: 'wait', seconds: 60 },
  task: { type: 'task', name: 'approve', title: 'Approve {{record.id}}?', assignees: { teams: ['Support'] } },
}

/** What the builder offers beside each field: the project's collections with their fields, its teams and members' emails. */
export interface BuilderChoices {
  collections: { name: string; fields: { name: string; type: string }[] }[]
  teams: string[]
  users: string[]
}

/** A schema as JSON with each node's rule in the words of the API's 400s (`must be an integer between 1 and 2592000`). */
function withRules(schema: TSchema): Record<string, unknown> {
  const each = (schemas: Record<string, TSchema>) => Object.fromEntries(Object.entries(schemas).map(([key, inner]) => [key, withRules(inner)]))
  const node: Record<string, unknown> = { ...schema, rule: ruleOf(schema) }
  if (schema.properties) node.properties = each(schema.properties as Record<string, TSchema>)
  if (schema.patternProperties) node.patternProperties = each(schema.patternProperties as Record<string, TSchema>)
  if (schema.items) node.items = withRules(schema.items as TSchema)
  if (Array.isArray(schema.anyOf)) node.anyOf = (schema.anyOf as TSchema[]).map(withRules)
  return node
}

/**
 * What builder.js is given, as one JSON attribute: the step schemas the API validates with (TypeBox schemas are JSON
 * Schema; each node with its rule in words), the pattern a template variable must match, the project's choices and the dry-run API.
 */
function builderData(place: WorkflowPlace, name: string, choices: BuilderChoices): string {
  const schemas = Object.fromEntries(STEP_TYPES.map((type) => [type, withRules(STEP_SCHEMAS[type])]))
  return JSON.stringify({ schemas, variable: TEMPLATE_VARIABLE.source, types: STEP_TYPES, templates: STEP_TEMPLATES, ...choices, dryRun: `${workflowApi(place, name)}/dry-run` })
}

/**
 * The editor: the definition as JSON (editor.js checks its syntax, sends it, and puts each error beside its line) and,
 * on its own tab, the builder of the same text (builder.js shows the tabs; without it the JSON is all there is).
 */
export function editorForm(place: WorkflowPlace, name: string, definition: WorkflowDefinition | undefined, choices: BuilderChoices): Html {
  const text = definition ? editableDefinition(definition) : ''
  const rows = Math.min(30, Math.max(8, text.split('\n').length + 1))
  return html`<form id="workflow-editor" data-editor data-method="PUT" action="${workflowApi(place, name)}" data-page="${workflowPagePath(place, name)}">
<div class="editor-tabs" role="tablist" aria-label="Edit the definition as" hidden><button type="button" role="tab" id="tab-builder" aria-controls="panel-builder" aria-selected="false" tabindex="-1">Builder</button><button type="button" role="tab" id="tab-json" aria-controls="panel-json" aria-selected="true">JSON</button></div>
<div id="panel-builder" class="builder" role="tabpanel" aria-labelledby="tab-builder" data-builder="${builderData(place, name, choices)}" hidden></div>
<div id="panel-json" role="tabpanel" aria-labelledby="tab-json">
<p class="muted">The definition as JSON: <code>collection</code>, optional <code>concurrency</code>, and <code>steps</code> (types: load, condition, update, note, http, wait, task; see <a href="/docs">the API reference</a>). Publishing makes a new version when it differs from the active one; the webhook URL stays the same.</p>
<div class="editor"><pre class="gutter" aria-hidden="true"></pre><textarea name="definition" rows="${rows}" wrap="off" spellcheck="false" autocapitalize="off" autocomplete="off" aria-label="Workflow definition (JSON)" aria-describedby="editor-problems">${text}</textarea></div>
<p><label class="check">Add a step <select id="step-template">${STEP_TYPES.map((type) => html`<option value="${JSON.stringify(STEP_TEMPLATES[type])}">${type}</option>`)}</select></label> <button type="button" data-add-step>Add</button></p>
</div>
<div role="alert"><ul id="editor-problems" class="editor-problems"></ul></div>
<p class="editor-result" role="status"></p>
<div class="dry-run" hidden><label>Dry run on record <input id="dry-run-record" maxlength="${RECORD_ID_MAX_LENGTH}" autocomplete="off" size="16"></label> <button type="button" data-dry-run>Dry run</button>
<span class="muted">Shows what each step would do to that record: nothing is written or called.</span>
<div id="dry-run-result" class="dry-run-result" role="status"></div></div>
<p><button type="submit">Publish</button></p>
</form>`
}

/** A test run: the manual-run API on the record chosen; the run's page opens. */
export function testRunForm(place: WorkflowPlace, name: string, collection: string): Html {
  return html`<form id="test-run" data-api action="${path('v1', 'project', place.project, 'environment', place.environment, 'workflow-runs')}" data-next="/runs/{runId}" data-done="Test run started.">
<input type="hidden" name="workflowName" value="${name}"><input type="hidden" name="teamName" value="${place.team}">
<label>Record id <input name="recordId" required maxlength="1024" autocomplete="off"> <span class="muted">(of <a href="${renderingPath(place.project, place.environment, place.team, 'c', collection)}">${collection}</a>; the run reads and writes it as you)</span></label>
<p class="form-error" role="alert"></p>
<button type="submit">Start test run</button>
</form>`
}

/** The versions, newest first, and the form choosing two to compare (a plain GET: the diff is rendered here). */
export function versionsSection(versions: WorkflowVersionView[], compared: { from: number; to: number } | undefined): Html {
  const options = (selected: number | undefined) => versions.map((v) => html`<option value="${v.version}"${v.version === selected ? html` selected` : ''}>v${v.version}</option>`)
  const newest = versions[0]?.version
  return html`${scrollingTable(html`<table class="versions"><thead><tr><th>Version</th><th>Published (UTC)</th><th>By</th><th>State</th></tr></thead><tbody>
${versions.map((v) => html`<tr><td>v${v.version}</td><td>${when(v.createdAt)}</td><td>${v.publishedBy?.email ?? html`<span class="muted">trellis apply</span>`}</td><td>${v.active ? html`<strong>active</strong>` : ''}</td></tr>`)}
</tbody></table>`)}
${
  versions.length < 2
    ? html`<p class="muted">Publish a second version to compare two.</p>`
    : html`<form method="get" id="compare" class="filters" action="#diff"><label class="check">From <select name="from">${options(compared?.from ?? versions[1]!.version)}</select></label>
<label class="check">to <select name="to">${options(compared?.to ?? newest)}</select></label> <button type="submit">Compare</button></form>`
}`
}

/** The line diff of two versions' definitions as the editor shows them; its box scrolls, so a keyboard can focus it. */
export function diffSection(from: { version: number; definition: WorkflowDefinition }, to: { version: number; definition: WorkflowDefinition }): Html {
  const lines = lineDiff(editableDefinition(from.definition), editableDefinition(to.definition))
  const changed = lines.filter((l) => l.kind !== 'same').length
  const mark = (line: DiffLine) => (line.kind === 'added' ? '+ ' : line.kind === 'removed' ? '- ' : '  ')
  return html`<h3 id="diff">v${from.version} → v${to.version}: ${changed === 0 ? 'no difference' : `${changed} line${changed === 1 ? '' : 's'} changed`}</h3>
<pre class="diff" tabindex="0" aria-label="${`Changes from v${from.version} to v${to.version}`}">${lines.map((line) => html`<span class="diff-${line.kind}">${mark(line)}${line.text}</span>\n`)}</pre>`
}
