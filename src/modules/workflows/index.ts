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
import { PublishedWorkflow, WorkflowAnswer, WorkflowParams } from './model.ts'
import { activeDefinition, publishWorkflow } from './service.ts'

const WORKFLOW = '/v1/project/:projectName/environment/:environmentName/team/:teamName/workflows/:workflowName'

export function workflowsModule(deps: AppDeps) {
  return new Elysia({ name: 'workflows', tags: ['workflows'] })
    .use(authPlugin(deps))
    .get(
      WORKFLOW,
      async ({ params, caller }) => {
        const { target, version, definition } = await read(
          deps.store,
          (function* () {
            const project = yield* requireProjectAdmin(caller, params.projectName)
            const target = yield* requireWorkflow(project.id, params.environmentName, params.teamName, params.workflowName)
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
}
