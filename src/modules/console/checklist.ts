/**
 * The console's "Get started" checklist: shown to instance administrators on the home page until every
 * step is done — each derived from the data, never remembered — or they hide it. Hiding is a cookie naming the
 * users of this browser who hid it (no schema change; another browser shows it again until the steps are done).
 */
import { html, type Html } from '../../console/html.ts'
import { readCookie } from '../../lib/session-cookie.ts'
import type { Op } from '../../db/op.ts'
import { hasCompleteProject } from '../directory/projects.ts'
import { hasWorkflows } from '../workflows/service.ts'
import { listTokens } from '../tokens/service.ts'
import { countUsers } from '../users/service.ts'

export const CHECKLIST_COOKIE = 'trellis_checklist_hidden'

/**
 * The commands the checklist shows, exactly as it shows them (test/console.test.ts runs each against a real data
 * directory). They run on the server, with the data directory or database `trellis serve` uses.
 */
export const GET_STARTED_COMMANDS = {
  addPerson: 'trellis user create --email person@example.com --username person',
  applyFile: 'trellis apply -f trellis.yaml',
} as const

export interface ChecklistState {
  project: boolean
  people: boolean
  workflow: boolean
  token: boolean
}

/** Which steps are done, from the data: a project with an environment, a team and a collection; another person; a workflow; a token of the user's own. */
export function* checklistState(userId: number): Op<ChecklistState> {
  return {
    project: yield* hasCompleteProject(),
    people: (yield* countUsers()) > 1,
    workflow: yield* hasWorkflows(),
    token: (yield* listTokens({ userId })).length > 0,
  }
}

export const checklistDone = (state: ChecklistState) => state.project && state.people && state.workflow && state.token

/** Whether this user hid the checklist in this browser. */
export function checklistHidden(request: Request, userId: number): boolean {
  return (readCookie(request.headers.get('cookie'), CHECKLIST_COOKIE) ?? '').split('.').includes(String(userId))
}

const step = (done: boolean, content: Html) => html`<li${done ? html` class="done"` : ''}>${done ? html`<strong class="done-mark">Done:</strong> ` : ''}${content}</li>`

export function checklist(state: ChecklistState, userId: number): Html {
  return html`<section class="checklist" id="checklist" aria-labelledby="checklist-title"><h2 id="checklist-title">Get started</h2><ol>
${step(state.project, html`<a href="/admin/projects">Create a project</a>, then open its settings to add an environment (e.g. production), a team and a collection.`)}
${step(state.people, html`<a href="/admin/users">Add people</a>: each gets a password or a one-time invitation link; then make them members of the project and its teams. On the server: <code>${GET_STARTED_COMMANDS.addPerson}</code>, then make their invitation link on the People page.`)}
${step(state.workflow, html`Publish a workflow: on a team's page (your project → an environment's team), <strong>New workflow</strong>, then edit its steps and publish. Or write it in an apply file (the format: docs/workflows.md; an example: examples/acme.yaml) and load it on the server: <code>${GET_STARTED_COMMANDS.applyFile}</code>.`)}
${step(state.token, html`<a href="/account">Create a token</a> for the API on your Account page, once you are a member of a project. The API reference is at <a href="/docs">/docs</a>.`)}
</ol>
<p class="muted">Commands run where <code>trellis serve</code> runs, with its data directory (<code>--data</code> or <code>TRELLIS_DATA_DIR</code>) or database (<code>TRELLIS_DATABASE_URL</code>). The manual is in the docs/ folder of Trellis's source (docs/README.md lists its pages).</p>
<p><button type="button" data-hide-checklist="${userId}">Hide this checklist</button></p></section>`
}
