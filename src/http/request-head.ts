/**
 * Limits on what precedes the body — the request target and the header fields — answered with the one JSON
 * error body (414, 431) before routing. Bun's own HTTP parser refuses an oversized head with a bare 431 and no
 * body; `serve` raises that parser limit (raiseParserHeaderLimit) far above these, so it is only a backstop.
 */
import http from 'node:http'
import { HttpError } from '../lib/errors.ts'
import { requestTarget } from './server-request.ts'

/** The request target (path and query), in bytes. */
export const MAX_URL_BYTES = 8 * 1024
/** All header fields together, as `name: value` lines, in bytes. */
export const MAX_HEADER_BYTES = 16 * 1024
export const MAX_HEADER_FIELDS = 100
/**
 * Bun's parser limit for the whole head once raised: past it (or past Bun's own ~200 header fields) Bun answers
 * a bare 431 itself, before any code of ours runs.
 */
export const PARSER_HEADER_LIMIT = 64 * 1024

/** onRequest hook: 414 uri_too_long or 431 headers_too_large, thrown so onError renders it like any other error. */
export function rejectOversizedHead({ request }: { request: Request }): void {
  const target = requestTarget(request).length
  if (target > MAX_URL_BYTES) {
    throw new HttpError(414, 'uri_too_long', `The request URL (path and query) is ${target} bytes; the limit is ${MAX_URL_BYTES} bytes`)
  }
  let bytes = 0
  let fields = 0
  request.headers.forEach((value, name) => {
    bytes += name.length + value.length + 4 // ": " and CRLF
    fields++
  })
  if (bytes > MAX_HEADER_BYTES || fields > MAX_HEADER_FIELDS) {
    throw new HttpError(
      431,
      'headers_too_large',
      `The request's header fields are ${bytes} bytes in ${fields} fields; the limits are ${MAX_HEADER_BYTES} bytes and ${MAX_HEADER_FIELDS} fields`,
    )
  }
}

/** Lets Bun's parser hand heads up to PARSER_HEADER_LIMIT to us (its default, 16 KiB, would answer them itself). */
export function raiseParserHeaderLimit(): void {
  ;(http as { maxHeaderSize: number }).maxHeaderSize = PARSER_HEADER_LIMIT
}
