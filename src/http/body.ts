/** Request body rules shared by every route: the size limit (413) and strict JSON parsing (400 `invalid_json`). */
import { badRequest, HttpError, invalidField, payloadTooLarge } from '../lib/errors.ts'
import { requestPath } from './server-request.ts'

/**
 * onRequest hook: refuses a declared Content-Length over the limit before reading a byte. It throws (rather than
 * returning a response) so the answer goes through onError and the after-response hooks like every other one.
 */
export function rejectOversizedBody(maxBytes: number) {
  return ({ request }: { request: Request }): void => {
    const declared = request.headers.get('content-length')
    const limit = bodyLimit(requestPath(request), maxBytes)
    if (declared !== null && Number(declared) > limit) throw payloadTooLarge(limit)
  }
}

/** Paths whose handler reads the raw text itself (the webhook checks the body only after authentication). */
export const RAW_BODY_PATHS = ['/v1/hooks/']

/**
 * A webhook call carries one `record_id` (at most 1,024 characters): DESIGN §8 caps its body at 64 KiB whatever
 * TRELLIS_MAX_BODY_BYTES allows the API's larger bodies (a note at its maximum).
 */
export const WEBHOOK_MAX_BODY_BYTES = 64 * 1024

const isRawBodyPath = (path: string) => RAW_BODY_PATHS.some((prefix) => path.startsWith(prefix))

/**
 * A records import (`POST …/collection/{c}/records.csv`, docs/records.md "CSV export and import") takes a CSV body
 * of at most 32 MiB, whatever TRELLIS_MAX_BODY_BYTES says of JSON bodies (`serve` reads up to 64 MiB per request).
 */
export const CSV_IMPORT_MAX_BYTES = 32 * 1024 * 1024

/** A records import's body as the route gets it: the text, and whether it came as `text/csv`. */
export interface CsvBody {
  csv: boolean
  text: string
}

/** 415 for an import whose body is not CSV. */
export function requireCsvBody(body: CsvBody | undefined): string {
  if (!body?.csv) throw new HttpError(415, 'unsupported_media_type', 'A records import takes CSV (Content-Type: text/csv)')
  return body.text
}
const isCsvBodyPath = (path: string) => path.startsWith('/v1/project/') && path.endsWith('/records.csv')

/** The body limit of a request to `path`: TRELLIS_MAX_BODY_BYTES; for a webhook call at most 64 KiB; for a records import 32 MiB. */
export function bodyLimit(path: string, maxBytes: number): number {
  if (isCsvBodyPath(path)) return CSV_IMPORT_MAX_BYTES
  return isRawBodyPath(path) ? Math.min(maxBytes, WEBHOOK_MAX_BODY_BYTES) : maxBytes
}

/**
 * onParse hook for every request body: counts bytes as they arrive (chunked bodies have no Content-Length),
 * accepts JSON only (415 otherwise), names the problem when the text is not JSON, and refuses JSON that is not
 * an object (every route's body is one; Elysia would otherwise report each field of it as missing).
 */
export function parseBody(maxBytes: number) {
  return async ({ request, contentType }: { request: Request; contentType: string }): Promise<unknown> => {
    if (!request.body) return undefined
    const path = requestPath(request)
    if (isRawBodyPath(path)) return readTextWithin(request, bodyLimit(path, maxBytes))
    // Its type is judged by the route, after the caller is (a caller without access learns nothing, whatever the body).
    if (isCsvBodyPath(path)) return { csv: isCsv(contentType), text: await readTextWithin(request, CSV_IMPORT_MAX_BYTES) } satisfies CsvBody
    if (!isJson(contentType)) {
      throw new HttpError(415, 'unsupported_media_type', 'Request bodies must be JSON (Content-Type: application/json)')
    }
    const text = await readTextWithin(request, maxBytes)
    if (text.trim() === '') throw badRequest('invalid_json', 'Request body is empty; expected a JSON value')
    const body = parseJsonText(text)
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalidField('body', 'must be a JSON object')
    return body
  }
}

/**
 * How deep a request's JSON may nest (objects and arrays), and how many members one object or array may hold. No
 * route's body comes near either; without them, 50,000 levels (350 KB) cost seconds of parsing and validation and
 * gigabytes of memory, and 60,000 keys tens of milliseconds, on the event loop every request shares.
 */
export const MAX_JSON_DEPTH = 32
export const MAX_JSON_MEMBERS = 10_000

/**
 * What makes `text` too costly to parse: more than `maxDepth` objects or arrays inside each other, or one with more
 * than `maxMembers` members; null when neither. One pass over the text, before anything is built, in time linear in
 * its length (a string's content is skipped to its closing quote at once). Brackets and commas inside strings do not
 * count.
 */
export function jsonShapeProblem(text: string, maxDepth = MAX_JSON_DEPTH, maxMembers = MAX_JSON_MEMBERS): 'deep' | 'wide' | null {
  const commas = new Uint32Array(maxDepth + 1) // commas seen in the open container at each depth
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) i = closingQuote(text, i)
    else if (c === 0x2c) {
      if (depth > 0 && ++commas[depth]! >= maxMembers) return 'wide'
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return 'deep'
      commas[depth] = 0
    } else if (c === 0x7d || c === 0x5d) depth = Math.max(0, depth - 1)
  }
  return null
}

/** Where the string opened at `open` ends: its closing quote, the first one not escaped (or the end of the text). */
function closingQuote(text: string, open: number): number {
  for (let quote = text.indexOf('"', open + 1); quote !== -1; quote = text.indexOf('"', quote + 1)) {
    let backslashes = 0
    while (text.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++
    if (backslashes % 2 === 0) return quote
  }
  return text.length
}

/** JSON.parse with a 400 `invalid_json` that says what is wrong; `json_too_deep` / `json_too_wide` past the limits. */
export function parseJsonText(text: string): unknown {
  const problem = jsonShapeProblem(text)
  if (problem === 'deep') throw badRequest('json_too_deep', `Request body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`)
  if (problem === 'wide') throw badRequest('json_too_wide', `Request body has an object or array of more than ${MAX_JSON_MEMBERS} members`)
  try {
    // A key spelled with an escape (`"toStr\u0069ng"`) is the same key: any `\u` takes the slower, reviving parse.
    return text.includes('toString') || text.includes('\\u') ? JSON.parse(text, withTextForm) : JSON.parse(text)
  } catch (error) {
    throw badRequest('invalid_json', `Request body is not valid JSON: ${(error as Error).message}`)
  }
}

/**
 * An object whose own `toString` is data (`{"toString": 1}`) has no text form: `${value}` throws a TypeError. Elysia
 * writes the value a schema refuses into its validation error that way, so such an object where a string belongs
 * would turn a 400 into a 500 (test/fuzz.test.ts sends such bodies). Such an object gets the text form every object has, as a
 * Symbol.toPrimitive: no JSON text can set or hide one, and neither JSON.stringify, Object.keys nor a schema sees it.
 */
function withTextForm(_key: string, value: unknown): unknown {
  if (value !== null && typeof value === 'object' && Object.hasOwn(value, 'toString')) {
    Object.defineProperty(value, Symbol.toPrimitive, { value: objectText, enumerable: false })
  }
  return value
}

const objectText = () => '[object Object]'

const mediaType = (contentType: string) => contentType.split(';')[0]?.trim().toLowerCase() ?? ''

function isJson(contentType: string): boolean {
  const type = mediaType(contentType)
  return type === 'application/json' || type.endsWith('+json')
}

const isCsv = (contentType: string) => mediaType(contentType) === 'text/csv'

/**
 * The body as text, refused past `maxBytes`. With a `Content-Length` (the server reads exactly that many bytes, and
 * one announcing more than the limit was refused before reading: `rejectOversizedBody`) it is read whole by the
 * runtime; a chunked body is read a chunk at a time and refused as soon as it passes the bound. The whole read costs
 * a fraction of the chunked one (which takes about a tenth of the server's CPU per webhook trigger).
 */
export async function readTextWithin(request: Request, maxBytes: number): Promise<string> {
  if (!request.body) return ''
  const announced = request.headers.get('content-length')
  if (announced !== null && /^\d{1,15}$/.test(announced)) {
    const whole = await request.arrayBuffer()
    if (whole.byteLength > maxBytes) throw payloadTooLarge(maxBytes) // a Request made in process may say anything
    return utf8.decode(whole)
  }
  const chunks: Uint8Array[] = []
  let size = 0
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength
    if (size > maxBytes) throw payloadTooLarge(maxBytes)
    chunks.push(chunk)
  }
  return utf8.decode(Buffer.concat(chunks))
}

/** UTF-8, an invalid sequence read as U+FFFD (never refused: the JSON parse that follows says what is wrong). */
const utf8 = new TextDecoder('utf-8', { fatal: false })
