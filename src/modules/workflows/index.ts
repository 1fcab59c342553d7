/** Workflow definitions through the API: `PUT …/team/{t}/workflows/{name}` publishes one, `GET` reads it (project admins). */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { requireProjectAdmin } from '../auth/service.ts'
import { errorResponses } from '../../http/errors.ts'
import { invalidFields } from '../../lib/errors.ts'
import { findCollection, findTeam, requireEnvironment } from '../directory/projects.ts'
import { requireWorkflow, webhookSettings } from '../workflows/service.ts'
import { read } from '../../db/read.ts'
import { findTriggerTarget } from '../workflows/service.ts'
import { type WorkflowDefinition, WorkflowDefinitionBody, workflowDefinitionProblems } from './definition.ts'
import { page, parseIdParameter, parseLimit, queryOf } from '../../http/list.ts'
import { listParameters } from '../../http/list-schema.ts'
import { ID_SCHEMA } from '../../http/params.ts'
import { DryRunAnswer, DryRunBody, PublishedWorkflow, WorkflowAnswer, WorkflowParams, WorkflowVersionAnswer, WorkflowVersionPage, WorkflowVersionParams } from './model.ts'
import { activeDefinition, pageWorkflowVersions, publishWorkflow, renderWorkflowVersions, workflowVersion } from './service.ts'
import { dryRunWorkflow } from './dry-run.ts'
import { typedStepProblems } from './typed-steps.ts'
import { collectionFields } from '../records/service.ts'

const WORKFLOW = '/v1/project/:projectName/environment/:environmentName/team/:teamName/workflows/:workflowName'

/** The workflow the path names, for a project admin (404 for an unknown project, environment, team or workflow). */
function* adminWorkflow(caller: Parameters<typeof requireProjectAdmin>[0], params: { projectName: string; environmentName: string; teamName: string; workflowName: string }) {
  const project = yield* requireProjectAdmin(caller, params.projectName)
  return yield* requireWorkflow(project.id, params.environmentName, params.teamName, params.workflowName)
}

export function workflowsModule(deps: AppDeps) {
  return new Elysia({ name: 'workflows', tags: ['workflows'] })
    .use(authPlugin(deps))
    .get(
      WORKFLOW,
      async ({ params, caller }) => {
        const { target, version, definition } = await read(
          deps.store,
          (function* () {
            const target = yield* adminWorkflow(caller, params)
            return { target, ...(yield* activeDefinition(target)) }
          })(),
        )
        return {
          name: definition.name,
          environment: definition.environment,
          team: definition.team,
          collection: definition.collection,
          version,
          concurrency: definition.concurrency ?? null,
          steps: definition.steps,
          webhook: webhookSettings(target, deps.secret, deps.config.baseUrl, deps.config.webhookRatePerMinute),
        }
      },
      {
        accountCall: true,
        params: WorkflowParams,
        response: { 200: WorkflowAnswer, ...errorResponses(400, 404) },
        detail: { operationId: 'getWorkflow', summary: 'A workflow as its runs use it now: the active version, its steps and concurrency limit, its webhook trigger (project admins)' },
      },
    )
    .put(
      WORKFLOW,
      async ({ params, body, caller }) => {
        // The path names the workflow, its environment and team; the body holds the rest of the definition.
        const definition = { ...body, name: params.workflowName, environment: params.environmentName, team: params.teamName }
        const problems = workflowDefinitionProblems(definition)
        if (problems.length > 0) throw invalidFields(problems.map((p) => ({ field: p.path, message: p.message })))
        const valid = definition as unknown as WorkflowDefinition
        const result = await write(deps.store, function* () {
          const project = yield* requireProjectAdmin(caller, params.projectName)
          const { environment } = yield* requireEnvironment(params.projectName, params.environmentName)
          const team = yield* findTeam(project.id, params.teamName)
          if (!team) throw invalidFields([{ field: 'teamName', message: `unknown team ${params.teamName}` }])
          const collection = yield* findCollection(project.id, valid.collection)
          if (!collection) throw invalidFields([{ field: 'collection', message: `unknown collection ${valid.collection}` }])
          const published = yield* publishWorkflow(deps.clock, { projectId: project.id, environmentId: environment.id, teamId: team.id, collectionId: collection.id }, valid, caller.user.id)
          return { published, target: (yield* findTriggerTarget(published.workflowId))! }
        })
        return {
          name: params.workflowName,
          version: result.published.version,
          outcome: result.published.outcome,
          webhook: webhookSettings(result.target, deps.secret, deps.config.baseUrl, deps.config.webhookRatePerMinute),
        }
      },
      {
        accountCall: true,
        params: WorkflowParams,
        body: WorkflowDefinitionBody,
        response: { 200: PublishedWorkflow, ...errorResponses(400, 404) },
        detail: { operationId: 'publishWorkflow', summary: 'Create or publish a new version of a workflow (project admins)' },
      },
    )
    .post(
      `${WORKFLOW}/dry-run`,
      async ({ params, body, caller }) => {
        // Checked as the PUT checks it, each problem under `definition.…`; then walked reading only.
        const definition = { ...body.definition, name: params.workflowName, environment: params.environmentName, team: params.teamName }
        const problems = workflowDefinitionProblems(definition, 'definition')
        if (problems.length > 0) throw invalidFields(problems.map((p) => ({ field: p.path, message: p.message })))
        const valid = definition as unknown as WorkflowDefinition
        return read(
          deps.store,
          (function* () {
            const target = yield* adminWorkflow(caller, params)
            const collection = yield* findCollection(target.projectId, valid.collection)
            if (!collection) throw invalidFields([{ field: 'definition.collection', message: `unknown collection ${valid.collection}` }])
            const typed = typedStepProblems(valid.steps, yield* collectionFields(collection.id, 'read'), 'definition')
            if (typed.length > 0) throw invalidFields(typed.map((p) => ({ field: p.path, message: p.message })))
            return yield* dryRunWorkflow(deps.clock, { projectId: target.projectId, environmentId: target.environmentId, collectionId: collection.id, workflowName: target.workflowName }, valid, body.recordId)
          })(),
        )
      },
      {
        accountCall: true,
        params: WorkflowParams,
        body: DryRunBody,
        response: { 200: DryRunAnswer, ...errorResponses(400, 404) },
        detail: {
          operationId: 'dryRunWorkflow',
          summary: 'What each step of a definition would do on one record, without writing anything or calling out: the fields an update would set, the request an http step would send, who a task would ask, which way a condition goes (project admins)',
        },
      },
    )
    .get(
      `${WORKFLOW}/versions`,
      async ({ params, caller, request }) => {
        const query = queryOf(request)
        const limit = parseLimit(query.limit)
        const before = parseIdParameter(query, 'before')
        const { target, ids } = await read(
          deps.store,
          (function* () {
            const target = yield* adminWorkflow(caller, params)
            return { target, ids: yield* pageWorkflowVersions(target, before, limit) }
          })(),
        )
        const { projectName, environmentName, teamName, workflowName } = params
        return page(ids, limit, (pageIds) => read(deps.store, renderWorkflowVersions(target, pageIds)), { projectName, environmentName, teamName, workflowName, limit })
      },
      {
        accountCall: true,
        params: WorkflowParams,
        response: { 200: WorkflowVersionPage, ...errorResponses(400, 404) },
        detail: {
          operationId: 'listWorkflowVersions',
          summary: 'A workflow\'s published versions, newest first: who published each and when, which one new runs use (project admins)',
          parameters: listParameters({ before: { description: 'Only versions numbered below this one (the next page)', schema: ID_SCHEMA } }, []),
        },
      },
    )
    .get(
      `${WORKFLOW}/versions/:version`,
      async ({ params, caller }) => {
        const { definition, ...version } = await read(
          deps.store,
          (function* () {
            return yield* workflowVersion(yield* adminWorkflow(caller, params), Number(params.version))
          })(),
        )
        return { ...version, name: params.workflowName, collection: definition.collection, concurrency: definition.concurrency ?? null, steps: definition.steps }
      },
      {
        accountCall: true,
        params: WorkflowVersionParams,
        response: { 200: WorkflowVersionAnswer, ...errorResponses(400, 404) },
        detail: { operationId: 'getWorkflowVersion', summary: 'One published version of a workflow: its steps, collection and concurrency limit as published (project admins)' },
      },
    )
}
