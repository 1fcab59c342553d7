/** TypeBox validation that reports problems as `path: message` with readable paths (`steps[2].set`). */
import type { TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'

export interface Problem {
  path: string
  message: string
}

/** `/steps/0/type` → `steps[0].type`, prefixed with `base`. */
export function joinPath(base: string, pointer: string): string {
  return pointer
    .split('/')
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), base)
}

/** One problem per path (the first TypeBox reports), in document order. */
export function schemaProblems(schema: TSchema, value: unknown, base = ''): Problem[] {
  const seen = new Set<string>()
  const problems: Problem[] = []
  for (const error of Value.Errors(schema, value)) {
    const path = joinPath(base, error.path) || '(root)'
    if (seen.has(path)) continue
    seen.add(path)
    // An object where "an object or null" is expected: say what is wrong inside it, not "expected union value".
    const inner = objectBranch(error.schema, error.value)
    if (inner) problems.push(...schemaProblems(inner, error.value, joinPath(base, error.path)))
    else problems.push({ path, message: describe(error.message, error.schema) })
  }
  return problems
}

function objectBranch(schema: TSchema, value: unknown): TSchema | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined
  const objects = ((schema.anyOf as TSchema[] | undefined) ?? []).filter((s) => s.type === 'object')
  return objects.length === 1 ? objects[0] : undefined
}

function describe(message: string, schema: TSchema): string {
  if (message.startsWith('Unexpected property')) return 'unknown field'
  const choices = (schema.anyOf as TSchema[] | undefined)?.map((s) => s.const).filter((c) => c !== undefined)
  if (choices && choices.length > 0) return `must be one of ${choices.join(', ')}`
  return lowerFirst(message)
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1)
}

export function formatProblems(problems: Problem[]): string {
  return problems.map((p) => `${p.path}: ${p.message}`).join('\n')
}
