/**
 * JSON with sorted keys, so two values that differ only in key order compare equal. `keepsOrder(path)` names the
 * objects whose key order is part of their meaning (a form's fields, shown in the order written): kept as given.
 */
export function canonicalJson(value: unknown, keepsOrder?: (path: readonly string[]) => boolean, path: readonly string[] = []): string {
  if (Array.isArray(value)) return `[${value.map((item, i) => canonicalJson(item, keepsOrder, [...path, String(i)])).join(',')}]`
  if (value && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined)
    if (!keepsOrder?.(path)) entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v, keepsOrder, [...path, k])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}
