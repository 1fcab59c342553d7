/**
 * A dry run: what each step of a definition would do on one record, walked with the executor's own template
 * rendering (src/lib/template.ts) and condition tests (./typed-steps.ts `conditionHolds`), reading only. Nothing is
 * written — no run, no task, no note, no record change, no activity entry — and nothing is called: an `http` step
 * shows the request it would send. A `task` step is taken as approved with an empty form (its outcome cannot be
 * known before someone decides), so the steps after it can be shown; a `wait` moves `{{now}}` on by its seconds.
 */
import type { Op } from '../../db/op.ts'
import type { Clock } from '../../lib/clock.ts'
import { notFound } from '../../lib/errors.ts'
import { redactUrl } from '../../lib/outbound/redact.ts'
import { recordField, renderTemplate, renderUrl, type TaskOutcome, taskField, type TemplateVariables, UrlTemplateError } from '../../lib/template.ts'
import { toIso } from '../../lib/time.ts'
import { collectionFields, findRecord, recordProblems } from '../records/service.ts'
import { resolvePeople } from '../tasks/service.ts'
import { dueInSeconds, type Step, stepLabel, taskNameOf, type WorkflowDefinition } from './definition.ts'
import { conditionHolds, typedChanges } from './typed-steps.ts'

/** What one step would do: `continue` to the next, `end` or `fail` the run; `skipped` when an earlier step stops it. */
export interface DryRunStep {
  index: number
  name: string
  type: Step['type']
  outcome: 'continue' | 'end' | 'fail' | 'skipped'
  /** The step's effect in words. */
  summary: string
  /** The step's effect as data: the fields it would set, the request it would send, who it would ask… */
  would: Record<string, unknown>
}

export interface DryRunAnswer {
  recordId: string
  /** How the run would end: every step done, ended by a condition or a rejection, or failed (`failure` says where). */
  outcome: 'succeeded' | 'ended' | 'failed'
  failure: { step: string; code: string; message: string } | null
  steps: DryRunStep[]
}

/** Where the dry run reads: the workflow's environment and project, the definition's collection. */
export interface DryRunScope {
  projectId: number
  environmentId: number
  collectionId: number
  workflowName: string
}

/** Stands for the run's id in templates: a dry run makes no run. */
export const DRY_RUN_ID = 'dry-run'

/** A step's failure as the executor would record it. */
class WouldFail extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly would: Record<string, unknown> = {},
  ) {
    super(message)
  }
}

type Walked = Omit<DryRunStep, 'index' | 'name' | 'type'>

/**
 * Walks `definition` (already checked: workflowDefinitionProblems, typedStepProblems) on record `recordId` of the
 * scope's collection; 404 when the record is not there. Reads only.
 */
export function* dryRunWorkflow(clock: Clock, scope: DryRunScope, definition: WorkflowDefinition, recordId: string): Op<DryRunAnswer> {
  const row = yield* findRecord({ environmentId: scope.environmentId, collectionId: scope.collectionId }, recordId)
  if (!row) throw notFound(`Record ${recordId} not found in collection ${definition.collection}`)
  let data = JSON.parse(row.data) as Record<string, unknown>
  let now = clock.now()
  const tasks = new Map<string, TaskOutcome>()
  const vars = (): TemplateVariables => ({ recordId, record: data, workflowName: scope.workflowName, runId: DRY_RUN_ID, now: toIso(now), tasks })
  const fields = yield* collectionFields(scope.collectionId, 'read')

  const walk = function* (step: Step): Op<Walked> {
    switch (step.type) {
      case 'load':
        return { outcome: 'continue', summary: 'Would read the record', would: { fields: Object.keys(data) } }
      case 'condition': {
        const value = taskNameOf(step.if.field) !== null ? taskField(tasks, step.if.field) : recordField(data, step.if.field)
        const matched = conditionHolds(step.if, value)
        const shown = value === undefined ? 'absent' : JSON.stringify(value)
        if (matched) return { outcome: 'continue', summary: `${step.if.field} is ${shown}: the test holds, the run goes on`, would: { field: step.if.field, value: value ?? null, matched } }
        if (step.else === 'fail') throw new WouldFail('condition_failed', `Condition on ${step.if.field} was not met (${shown})`, { field: step.if.field, value: value ?? null, matched })
        return { outcome: 'end', summary: `${step.if.field} is ${shown}: the test fails, the run ends (succeeded)`, would: { field: step.if.field, value: value ?? null, matched } }
      }
      case 'update': {
        const changes = typedChanges(step.set, renderTemplate(step.set, vars()), fields)
        const updated = { ...data, ...changes }
        const problems = yield* recordProblems({ environmentId: scope.environmentId, collectionId: scope.collectionId }, fields, updated)
        if (problems.length > 0) {
          const named = problems.map((p) => `${p.field} ${p.message}`).join('; ')
          throw new WouldFail('invalid_field', `The record as updated would not conform to its collection's schema: ${named}`, { set: changes, details: problems })
        }
        data = updated
        return { outcome: 'continue', summary: `Would set ${Object.keys(changes).join(', ')}`, would: { set: changes } }
      }
      case 'note': {
        const title = renderTemplate(step.title, vars())
        return { outcome: 'continue', summary: `Would add the note “${title}”`, would: { title, content: renderTemplate(step.content, vars()) } }
      }
      case 'http': {
        let url: URL
        try {
          url = renderUrl(step.url, vars())
        } catch (error) {
          if (error instanceof UrlTemplateError) throw new WouldFail('http_invalid_url', error.message)
          throw error
        }
        // Header values may be credentials: their names only, as a run's recorded step shows no secret either.
        const would = {
          method: step.method,
          url: redactUrl(url),
          headers: Object.keys(step.headers ?? {}),
          body: step.body === undefined ? null : renderTemplate(step.body, vars()),
        }
        return { outcome: 'continue', summary: `Would call ${step.method} ${redactUrl(url)} (not called)`, would }
      }
      case 'wait': {
        now += step.seconds * 1000
        return { outcome: 'continue', summary: `Would wait ${step.seconds} s, until ${toIso(now)}`, would: { seconds: step.seconds, until: toIso(now) } }
      }
      case 'task': {
        const people = yield* resolvePeople(scope.projectId, step.assignees)
        const assignees = { teams: step.assignees.teams ?? [], users: step.assignees.users ?? [] }
        if (people.unknown.length > 0) throw new WouldFail('task_assignee_unknown', `The task's assignees are not in the project: ${people.unknown.join(', ')}`, { assignees })
        const title = renderTemplate(step.title, vars()).slice(0, 500)
        tasks.set(step.name, { taskId: '', decision: 'approved', input: {}, decidedBy: '' })
        const who = [...assignees.teams.map((t) => `team ${t}`), ...assignees.users].join(', ')
        const form = step.form === undefined ? [] : Object.keys((step.form as { properties?: Record<string, unknown> }).properties ?? {})
        return {
          outcome: 'continue',
          summary: `Would ask ${who} “${title}” and wait for the decision (taken as approved here)`,
          would: { title, assignees, approvals: step.approvals ?? 1, formFields: form, dueInSeconds: dueInSeconds(step), onTimeout: step.onTimeout ?? null, onReject: step.onReject ?? 'fail' },
        }
      }
    }
  }

  const steps: DryRunStep[] = []
  let outcome: DryRunAnswer['outcome'] = 'succeeded'
  let failure: DryRunAnswer['failure'] = null
  for (const [index, step] of definition.steps.entries()) {
    const place = { index, name: stepLabel(step, index), type: step.type }
    if (outcome !== 'succeeded') {
      steps.push({ ...place, outcome: 'skipped', summary: 'Not reached', would: {} })
      continue
    }
    try {
      const walked = yield* walk(step)
      steps.push({ ...place, ...walked })
      if (walked.outcome === 'end') outcome = 'ended'
    } catch (error) {
      if (!(error instanceof WouldFail)) throw error
      steps.push({ ...place, outcome: 'fail', summary: `Would fail (${error.code}): ${error.message}`, would: error.would })
      outcome = 'failed'
      failure = { step: place.name, code: error.code, message: error.message }
    }
  }
  return { recordId, outcome, failure, steps }
}
