/**
 * Webhook URLs (DESIGN §8): `{base}/v1/hooks/{payload}.{signature}` where payload is base64url JSON
 * `{"v":1,"w":workflowId,"r":renderingId,"g":generation}` and signature its HMAC-SHA256 under the instance secret.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'

export interface WebhookPayload {
  workflowId: number
  renderingId: number
  generation: number
}

export const WEBHOOK_PATH_PREFIX = '/v1/hooks/'

function sign(secret: Buffer, payload: string): Buffer {
  return createHmac('sha256', secret).update(payload).digest()
}

/** The path segment after `/v1/hooks/`. */
export function webhookToken(secret: Buffer, p: WebhookPayload): string {
  const payload = Buffer.from(JSON.stringify({ v: 1, w: p.workflowId, r: p.renderingId, g: p.generation })).toString('base64url')
  return `${payload}.${sign(secret, payload).toString('base64url')}`
}

export function webhookUrl(secret: Buffer, baseUrl: string, p: WebhookPayload): string {
  return `${baseUrl}${WEBHOOK_PATH_PREFIX}${webhookToken(secret, p)}`
}

/** Returns the payload of a genuine token, or null when it is malformed or its signature does not match. */
export function verifyWebhookToken(secret: Buffer, token: string | undefined): WebhookPayload | null {
  // Undefined when the path segment is not valid percent-encoding (`%eyJ…`): the router cannot decode it.
  if (typeof token !== 'string') return null
  const parts = token.split('.')
  if (parts.length !== 2) return null
  const [payload, signature] = parts as [string, string]
  if (!/^[A-Za-z0-9_-]{1,512}$/.test(payload) || !/^[A-Za-z0-9_-]{43}$/.test(signature)) return null
  const expected = sign(secret, payload)
  const given = Buffer.from(signature, 'base64url')
  // The last of 43 characters has 2 unused bits: only the canonical spelling is the URL that was handed out.
  if (given.toString('base64url') !== signature) return null
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null
  try {
    const body = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>
    const ids = [body.w, body.r, body.g]
    if (body.v !== 1 || !ids.every((n) => Number.isSafeInteger(n) && (n as number) > 0)) return null
    return { workflowId: body.w as number, renderingId: body.r as number, generation: body.g as number }
  } catch {
    return null
  }
}
