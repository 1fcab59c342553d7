/**
 * Console: what starts a workflow besides its webhook — the events section of its trigger settings page (the events
 * API's form: a box per record and note event, `where`, run as, debounce; removed by its own form) — and, on a run's page,
 * what started the run, for every trigger: its webhook, the Run button, the API, its schedule, an event and its chain.
 */
import { html, type Html } from '../../console/html.ts'
import type { Answer } from '../../db/op.ts'
import type { EventSpec, EventTriggerRow } from '../../db/workflow-events.ts'
import type { renderRuns } from '../runs/service.ts'
import type { EventsSettings } from '../workflow-events/service.ts'
import { recordLink, runPath, type WorkflowPlace } from './links.ts'
import { when } from './page.ts'

type RunView = Answer<ReturnType<typeof renderRuns>>[number]

const EXAMPLE_WHERE = '{"status": {"eq": "disputed"}}'

/** The event kinds, in words, in the order the form lists them. */
const EVENT_KINDS: { event: EventSpec['event']; label: string }[] = [
  { event: 'recordCreated', label: 'A record is created' },
  { event: 'recordUpdated', label: 'A record is updated' },
  { event: 'recordDeleted', label: 'A record is deleted' },
  { event: 'noteAdded', label: 'A note is added to a record' },
]

/**
 * The form of `PUT …/events`: a box per event kind (a row of `on`, sent when ticked), the fields an update must change
 * (offered from the collection's schema), `where` as the records list's filters in JSON, run as, debounce — the API's
 * errors name the field — and Remove when set.
 */
export function eventsSection(api: string, view: { settings: EventsSettings | null; counts: Pick<EventTriggerRow, 'received' | 'started' | 'skipped'> | null; fieldNames: string[] }): Html {
  const { settings, counts, fieldNames } = view
  const chosen = (event: string) => settings?.on.find((spec) => spec.event === event)
  const where = settings?.where === undefined ? '' : JSON.stringify(settings.where)
  const rows = EVENT_KINDS.map(({ event, label }) => {
    const spec = chosen(event)
    const fields =
      event === 'recordUpdated'
        ? html` <label class="inline">only when one of these fields changes (comma-separated; empty: any) <input name="fields" data-type="list" size="24" list="events-field-names" autocomplete="off" value="${spec?.fields?.join(', ') ?? ''}"></label>`
        : ''
    return html`<div data-row data-row-if="event"><label class="inline"><input type="checkbox" name="event" value="${event}" data-value${spec ? ' checked' : ''}> ${label}</label>${fields}</div>`
  })
  return html`<h3 id="events">Record and note events: <span id="events-state">${settings ? 'on' : 'off'}</span></h3>
<p>A run starts when a record of the workflow's collection is created, updated (when one of the fields named changed, if any), deleted, or gets a note — in this environment, for the records matching <em>where</em> (the records list's filters: eq ne lt lte gt gte in contains). A record with a run of this workflow under way is skipped. Runs use the rights of the user named.</p>
${counts ? html`<p class="muted" id="events-counts">${counts.received} events received, ${counts.started} runs started, ${counts.skipped} skipped.</p>` : ''}
<form id="events-form" data-api data-method="PUT" action="${api}" data-done="Events saved.">
<fieldset><legend>Start a run when</legend><div data-rows="on">${rows}</div></fieldset>
<datalist id="events-field-names">${fieldNames.map((name) => html`<option value="${name}"></option>`)}</datalist>
<label>Where (the records list's filters as JSON, optional) <textarea name="where" data-type="json" rows="2" cols="70" placeholder='${EXAMPLE_WHERE}'>${where}</textarea></label>
<label>Run as (email) <input name="runAs" type="email" size="30" value="${settings?.runAs ?? ''}"></label>
<label>Debounce (seconds, optional) <input name="debounceSeconds" data-type="number" inputmode="numeric" size="8" value="${settings?.debounceSeconds ?? ''}"></label>
<p class="form-error" role="alert"></p>
<button type="submit">Save events</button>
</form>
${settings ? html`<form class="inline" data-api data-method="DELETE" action="${api}" data-confirm="Stop starting this workflow on events? Events not yet dispatched are dropped." data-done="Events removed."><button type="submit" class="danger">Remove events</button> <span class="form-error" role="alert"></span></form>` : ''}`
}

/** What started the run, in words: how, by whom (the token, if any), and for an event the change and its chain. */
export function runOrigin(run: RunView, place: WorkflowPlace | undefined): Html {
  const by = html` by ${run.user.email}${run.token ? html` through token “${run.token.name}” (<code>${run.token.prefix}…</code>)` : ''}`
  switch (run.trigger) {
    case 'webhook':
      return html`its webhook${by}`
    case 'manual':
      // A start by hand with a token came through the API; without one, from a console session's Run button.
      return run.token ? html`the API (started by hand)${by}` : html`the Run button in the console${by}`
    case 'schedule': {
      return html`its schedule${run.scheduledFor ? html`, the tick of ${when(run.scheduledFor)}` : ''}, as ${run.user.email}`
    }
    case 'event': {
      const cause = run.cause
      if (!cause) return html`an event, as ${run.user.email}`
      const what =
        cause.event === 'recordUpdated'
          ? html`an update of ${recordLink(place, cause.recordId)}${cause.changedFields?.length ? html` (${cause.changedFields.join(', ')} changed)` : ''}`
          : cause.event === 'recordCreated'
            ? html`the creation of ${recordLink(place, cause.recordId)}`
            : cause.event === 'recordDeleted'
              ? html`the deletion of ${recordLink(place, cause.recordId)}`
              : html`a note added to ${recordLink(place, cause.recordId)}${cause.noteId === undefined ? '' : html` (note ${cause.noteId})`}`
      const chain = cause.chain.length === 0 ? '' : html`<br><span class="muted">made by</span> ${cause.chain.map((link, i) => html`${i > 0 ? ' → ' : ''}<a class="mono" href="${runPath(link.runId)}">${link.workflow}</a>`)}`
      return html`<span id="run-cause">${cause.event}: ${what}, as ${run.user.email}${chain}</span>`
    }
  }
}
