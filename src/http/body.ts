/** Request body rules shared by every route: the size limit (413) and strict JSON parsing (400 `invalid_json`). */
import { badRequest, errorResponse, payloadTooLarge } from './errors.ts'

/** onRequest hook: refuses a declared Content-Length over the limit before reading a byte. */
export function rejectOversizedBody(maxBytes: number) {
  return ({ request }: { request: Request }): Response | undefined => {
    const declared = request.headers.get('content-length')
    if (declared !== null && Number(declared) > maxBytes) return errorResponse(payloadTooLarge(maxBytes))
  }
}

/**
 * onParse hook for JSON bodies: counts bytes as they arrive (chunked bodies have no Content-Length)
 * and names the problem when the text is not JSON.
 */
export function parseJsonBody(maxBytes: number) {
  return async ({ request, contentType }: { request: Request; contentType: string }): Promise<unknown> => {
    if (!isJson(contentType)) return undefined
    const text = await readTextWithin(request, maxBytes)
    if (text.trim() === '') throw badRequest('invalid_json', 'Request body is empty; expected a JSON value')
    try {
      return JSON.parse(text)
    } catch (error) {
      throw badRequest('invalid_json', `Request body is not valid JSON: ${(error as Error).message}`)
    }
  }
}

function isJson(contentType: string): boolean {
  const type = contentType.split(';')[0]?.trim().toLowerCase() ?? ''
  return type === 'application/json' || type.endsWith('+json')
}

async function readTextWithin(request: Request, maxBytes: number): Promise<string> {
  if (!request.body) return ''
  const chunks: Uint8Array[] = []
  let size = 0
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength
    if (size > maxBytes) throw payloadTooLarge(maxBytes)
    chunks.push(chunk)
  }
  return new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(chunks))
}
