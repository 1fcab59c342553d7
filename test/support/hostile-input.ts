/**
 * Hostile input as fast-check arbitraries, for the property-based fuzz (test/fuzz.test.ts): strings (long ones at
 * and around each documented maximum, unicode, lone surrogates, NUL and other control characters, SQL and HTML),
 * numbers (as numbers and as text, huge, negative, fractional, beyond what a double holds), JSON values of any shape,
 * and whole JSON texts no serializer writes (duplicate keys, deep and wide nesting, numbers out of range, raw escapes
 * of lone surrogates and NUL, bytes that are not UTF-8, bodies over the limit). Also made from an OpenAPI schema:
 * values that obey it (with real fixture names where a field's name says so), and the same with one part broken.
 */
import fc from 'fast-check'
import { DEFAULT_MAX_BODY_BYTES } from '../../src/config.ts'
import { MAX_JSON_DEPTH, MAX_JSON_MEMBERS } from '../../src/http/body.ts'
import type { Json } from './openapi-requests.ts'

export const SQL_PAYLOADS = [
  "' OR '1'='1",
  "'; DROP TABLE users; --",
  '" OR ""="',
  "1; SELECT pg_sleep(10) --",
  "1' AND randomblob(500000000) --",
  "%' OR 1=1 ESCAPE '\\",
  'Acme\' UNION SELECT token_hash FROM api_tokens --',
  '$1',
  '?',
  '\\',
]

export const HTML_PAYLOADS = [
  '<script>alert(1)</script>',
  '<img src=x onerror=alert(1)>',
  '"><svg onload=alert(1)>',
  '<a href="javascript:alert(1)">x</a>',
  '<!--',
  ']]>',
  '{{constructor.constructor("return 1")()}}',
  '${process.exit(1)}',
]

/** Text that no path segment, query value or field should turn into a 5xx. */
export const ODD_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udc00x',
  'x\ud83d',
  '\u202egnp.exe',
  '\ufeff',
  '\u00a0',
  '\r\n',
  '\t',
  '😀'.repeat(50),
  'e\u0301',
  '..',
  '../../etc/passwd',
  '%00',
  '%zz',
  '%',
  '__proto__',
  'constructor',
  'toString',
  'null',
  'undefined',
  'true',
  '[]',
  '{}',
  'NaN',
  'Infinity',
  '-Infinity',
  ...SQL_PAYLOADS,
  ...HTML_PAYLOADS,
]

/** Numbers as text: what a query or path value holding "a number" may say. */
export const NUMBER_TEXTS = [
  '0',
  '-0',
  '-1',
  '1.5',
  '1e3',
  '1E-7',
  '0x10',
  '0b1',
  '010',
  ' 1',
  '1 ',
  '+1',
  '1_000',
  '9007199254740991',
  '9007199254740992',
  '9007199254740993',
  '18446744073709551616',
  '1e309',
  '-1e309',
  '9'.repeat(400),
  '0.' + '0'.repeat(400) + '1',
  'NaN',
  'Infinity',
]

/** The documented maxima (100, 200, 320, 500, 1024, 65536 characters…) and one either side, and far beyond. */
const LENGTHS = [99, 100, 101, 199, 200, 201, 319, 320, 321, 499, 500, 501, 1023, 1024, 1025, 10_000, 65_536, 65_537, 200_000]

/** A UTF-16 code unit in the surrogate range: half of a pair, alone. */
const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit))

const CHARACTERS = ['x', 'é', '😀', '\u0001', '"', '\\', '<', '\u0000']

export function hostileString(): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: fc.constantFrom(...ODD_STRINGS), weight: 4 },
    { arbitrary: fc.constantFrom(...NUMBER_TEXTS), weight: 2 },
    { arbitrary: fc.string({ unit: 'binary', maxLength: 40 }), weight: 2 },
    { arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }), weight: 1 },
    { arbitrary: fc.string({ unit: fc.oneof(fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 1 }), loneSurrogate), maxLength: 20 }), weight: 1 },
    { arbitrary: fc.tuple(fc.constantFrom(...LENGTHS), fc.constantFrom(...CHARACTERS)).map(([length, c]) => c.repeat(length).slice(0, length)), weight: 2 },
  )
}

export function hostileNumber(): fc.Arbitrary<number> {
  return fc.oneof(
    fc.integer(),
    fc.double(),
    fc.constantFrom(0, -0, -1, 1.5, 2 ** 31, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, 2 ** 64, -(2 ** 63), Number.MAX_VALUE, Number.MIN_VALUE, 1e21),
  )
}

/** Any JSON value, its strings and numbers hostile, its keys too (`__proto__` included), a few levels deep. */
export function hostileJsonValue(): fc.Arbitrary<unknown> {
  const key = fc.oneof(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', '', 'a.b', 'steps[0]', '$where', '\u0000', '\ud800'), fc.string({ maxLength: 8 }))
  const { value } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      hostileString(),
      hostileNumber(),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(key, tie('value'), { maxKeys: 4 }),
    ),
  }))
  return value
}

// ── Whole bodies as text (or bytes): what JSON.stringify never writes ─────────────────────────────────────────────

const nested = (depth: number, kind: 'object' | 'array') => (kind === 'object' ? `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}` : `{"a":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`)

/** Texts built once (some are megabytes): picking one costs nothing per case. */
const RAW_BODIES: (string | Uint8Array)[] = [
  '',
  ' ',
  'null',
  'true',
  '1',
  '"a string"',
  '[]',
  '[{}]',
  '{',
  '{"a":}',
  "{'a':1}",
  '{"a":1,}',
  '{}x',
  '\ufeff{}',
  '{"a":1}{"b":2}',
  '{"__proto__":{"isAdmin":true}}',
  '{"constructor":{"prototype":{"x":1}}}',
  '{"a":1e309}',
  '{"a":-1e309}',
  `{"a":${'9'.repeat(5000)}}`,
  '{"a":9007199254740993}',
  '{"a":"\\ud800"}',
  '{"a":"\\udc00\\ud800"}',
  '{"a":"\\u0000"}',
  '{"\\u0000":1}',
  '{"\\ud800":1}',
  '{"a":"\\x41"}',
  '{"a":"\\u12"}',
  'a=1&b=2',
  '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--',
  nested(MAX_JSON_DEPTH - 1, 'object'),
  nested(MAX_JSON_DEPTH, 'object'),
  nested(MAX_JSON_DEPTH + 1, 'object'),
  nested(MAX_JSON_DEPTH + 1, 'array'),
  nested(50_000, 'object'),
  nested(50_000, 'array'),
  `{"a":"${'['.repeat(50_000)}"}`,
  JSON.stringify(Object.fromEntries(Array.from({ length: MAX_JSON_MEMBERS }, (_, i) => [`k${i}`, i]))),
  JSON.stringify(Object.fromEntries(Array.from({ length: MAX_JSON_MEMBERS + 1 }, (_, i) => [`k${i}`, i]))),
  JSON.stringify({ a: Array.from({ length: MAX_JSON_MEMBERS + 1 }, () => 0) }),
  JSON.stringify({ a: 'x'.repeat(DEFAULT_MAX_BODY_BYTES) }),
  // Not UTF-8: a stray byte, an overlong '/', an encoded surrogate, a cut sequence.
  new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
  new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d]),
  new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d]),
  new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xe2, 0x82, 0x22, 0x7d]),
  new Uint8Array([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]),
]

export function rawBody(): fc.Arbitrary<string | Uint8Array> {
  return fc.constantFrom(...RAW_BODIES)
}

/** The JSON text of `value` with its first key written twice: the second time with `other` (JSON.parse keeps the last). */
export function withDuplicateKey(value: unknown, other: unknown): string {
  const text = JSON.stringify(value)
  if (value === null || typeof value !== 'object' || Array.isArray(value) || Object.keys(value).length === 0) return text
  const first = Object.keys(value)[0]!
  return `${text.slice(0, -1)},${JSON.stringify(first)}:${JSON.stringify(other) ?? 'null'}}`
}

// ── Values made from an OpenAPI schema ─────────────────────────────────────────────────────────────────────────────

/** Real values by field name: `known` strings (most of the time, read when a value is made), `pinned` values always. */
export interface FieldValues {
  known: Record<string, string>
  pinned?: Record<string, unknown>
}

/**
 * Values that obey `schema` (short strings and lists: the maxima are reached by `hostileString`), with the fixture's
 * value for a field of a name it knows most of the time, so a request gets past the lookups to the code behind them.
 */
export function schemaValue(schema: Json, fields: FieldValues, name = ''): fc.Arbitrary<unknown> {
  const { known, pinned = {} } = fields
  if (name in pinned) return fc.constant(pinned[name])
  if (schema.const !== undefined) return fc.constant(schema.const)
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]))
  if (Array.isArray(schema.anyOf)) return fc.oneof(...(schema.anyOf as Json[]).map((member) => schemaValue({ ...member, ...withoutAnyOf(schema) }, fields, name)))
  if (Array.isArray(schema.type)) return fc.oneof(...(schema.type as string[]).map((type) => schemaValue({ ...schema, type }, fields, name)))
  switch (schema.type) {
    case 'string': {
      const minLength = schema.minLength ?? 0
      const maxLength = Math.max(minLength, Math.min(schema.maxLength ?? 40, 40))
      const any = schema.format === 'date-time' || /ISO 8601/.test(schema.description ?? '') ? isoDateTime() : fc.string({ minLength, maxLength, unit: 'grapheme' })
      return name in known ? fc.oneof({ arbitrary: fc.constant(name).map((key) => known[key]!), weight: 6 }, { arbitrary: any, weight: 1 }) : any
    }
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1_000_000, max: schema.maximum ?? 1_000_000 })
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true })
    case 'boolean':
      return fc.boolean()
    case 'null':
      return fc.constant(null)
    case 'array':
      return fc.array(schemaValue(schema.items ?? {}, fields), { minLength: schema.minItems ?? 0, maxLength: Math.max(schema.minItems ?? 0, Math.min(schema.maxItems ?? 3, 3)) })
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Json>
      const record = fc.record(
        Object.fromEntries(Object.entries(properties).map(([key, property]) => [key, schemaValue(property, fields, key)])),
        { requiredKeys: (schema.required ?? []) as string[] },
      )
      if (!schema.patternProperties && schema.additionalProperties !== true) return record
      return fc.tuple(record, fc.dictionary(fc.string({ maxLength: 10 }), hostileJsonValue(), { maxKeys: 3 })).map(([fields, more]) => ({ ...more, ...fields }))
    }
    default:
      return hostileJsonValue()
  }
}

function withoutAnyOf(schema: Json): Json {
  const { anyOf: _anyOf, ...rest } = schema
  return rest
}

/** Times the date filters and `expiresAt` take, and near misses. */
export function isoDateTime(): fc.Arbitrary<string> {
  return fc.oneof(
    fc.date({ min: new Date(Date.UTC(1970, 0, 1)), max: new Date(Date.UTC(2200, 0, 1)), noInvalidDate: true }).map((d) => d.toISOString()),
    fc.constantFrom('2026-11-21', '2026-11-21T12:00:00Z', '2026-11-21T12:00:00.123456789Z', '2026-11-21T12:00:00+14:00', '2026-02-30T00:00:00Z', '0000-01-01T00:00:00Z', '+275760-09-13T00:00:00.000Z', '-000001-01-01T00:00:00Z', '9999999-99-99', '2026-11-21T25:61:61Z', '1e13', 'yesterday'),
  )
}

/** Where a value can be changed: the empty path is the value itself; each step is a key or an index. */
type Path = (string | number)[]

function pathsOf(value: unknown, at: Path = []): Path[] {
  if (value === null || typeof value !== 'object') return [at]
  const children = Array.isArray(value) ? value.map((item, index) => pathsOf(item, [...at, index])) : Object.entries(value).map(([key, item]) => pathsOf(item, [...at, key]))
  return [at, ...children.flat()]
}

function replaced(value: unknown, path: Path, change: (old: unknown) => unknown): unknown {
  if (path.length === 0) return change(value)
  const [step, ...rest] = path
  if (Array.isArray(value)) return value.map((item, index) => (index === step ? replaced(item, rest, change) : item))
  const record = value as Record<string, unknown>
  return { ...record, [step!]: replaced(record[step!], rest, change) }
}

/**
 * `value` with one part broken: some value in it replaced by a hostile one, a field dropped, or a field the schema does
 * not know added — anywhere in it, chosen by `where` (an index into every place in the value).
 */
export function brokenValue(value: unknown): fc.Arbitrary<unknown> {
  const places = pathsOf(value)
  return fc.tuple(fc.nat({ max: places.length - 1 }), fc.constantFrom('replace', 'drop', 'add'), hostileJsonValue(), fc.string({ maxLength: 12 })).map(([where, how, hostile, key]) => {
    const path = places[where]!
    if (how === 'replace') return replaced(value, path, () => hostile)
    if (how === 'drop' && path.length > 0) {
      const parent = path.slice(0, -1)
      const last = path[path.length - 1]!
      return replaced(value, parent, (old) => (Array.isArray(old) ? old.filter((_, index) => index !== last) : Object.fromEntries(Object.entries(old as object).filter(([k]) => k !== last))))
    }
    return replaced(value, path, (old) => (old !== null && typeof old === 'object' && !Array.isArray(old) ? { ...old, [key || 'unexpected']: hostile } : hostile))
  })
}

// ── Text on the wire: path segments, query strings, header values ──────────────────────────────────────────────────

/**
 * `text` percent-encoded as a URL carries it; a lone surrogate (which `encodeURIComponent` refuses) as the three bytes
 * UTF-8 would give its code point, which no decoder accepts.
 */
export function percentEncoded(text: string): string {
  if (text.isWellFormed()) return encodeURIComponent(text)
  let out = ''
  for (const char of text) {
    const unit = char.charCodeAt(0)
    if (char.length === 1 && unit >= 0xd800 && unit <= 0xdfff) {
      out += [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)].map((byte) => `%${byte.toString(16).toUpperCase()}`).join('')
    } else {
      out += encodeURIComponent(char)
    }
  }
  return out
}

/** Segments sent as they are, not encoded: escapes that do not decode, dot segments, encoded slashes and NUL. */
export const RAW_SEGMENTS = ['%zz', '%', '%00', '%2F', '%2e%2e', '..', '.', '%ED%A0%80', '%C0%AF', '%FF', 'a%20b', ';x=1', 'x'.repeat(9_000)]

/** A header value Request accepts (no NUL, CR or LF): printable ASCII and Latin-1, sometimes long. */
export function headerValue(): fc.Arbitrary<string> {
  const unit = fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff })).map((code) => String.fromCharCode(code))
  return fc.oneof(
    fc.string({ unit, maxLength: 60 }),
    fc.constantFrom(...SQL_PAYLOADS, ...HTML_PAYLOADS, 'x'.repeat(17_000), '', ' ', 'null', '\t'),
  )
}
