/** src/db/claims.ts: the rules a claim hands workers out by, as plain functions. */
import { describe, expect, test } from 'bun:test'
import { type ClaimCandidate, claimOrder, deferredRuns, fairShare, projectCap, type RunningRun } from '../src/db/claims.ts'

const run = (id: string, projectId: number, availableAt: number, workflowId = projectId): ClaimCandidate => ({
  id, workflowId, environmentId: projectId, projectId, availableAt, concurrencyLimit: null,
})
const holding = (projectId: number, n: number): RunningRun[] => Array.from({ length: n }, () => ({ workflowId: projectId, projectId, mine: true }))

describe('projectCap: the most workers one project holds while others have workflows', () => {
  test.each([
    [4, 1, Infinity],
    [4, 2, 3],
    [1, 2, 1],
    [2, 5, 1],
    [8, 2, 6],
    [16, 3, 12],
    [Infinity, 2, Infinity],
  ])('C = %p, %p project(s) with workflows → %p', (concurrency, projects, cap) => {
    expect(projectCap(concurrency, projects)).toBe(cap)
  })

  test('fairShare: ceil(C / N), at least 1', () => {
    expect([fairShare(4, 2), fairShare(4, 3), fairShare(4, 8), fairShare(4, 0)]).toEqual([2, 2, 1, 4])
  })
})

describe('claimOrder', () => {
  const acme = [1, 2, 3, 4, 5, 6].map((i) => run(`a${i}`, 1, i))
  test('a project alone takes every worker; with a cap it stops there', () => {
    expect(claimOrder(acme, { running: [], startable: null, projectCap: Infinity }).slice(0, 4)).toEqual(['a1', 'a2', 'a3', 'a4'])
    expect(claimOrder(acme, { running: [], startable: null, projectCap: 3 })).toEqual(['a1', 'a2', 'a3'])
    expect(claimOrder(acme, { running: holding(1, 3), startable: null, projectCap: 3 })).toEqual([])
  })

  test('the project holding fewest goes first, then the older run; the cap holds throughout', () => {
    const globex = [run('g1', 2, 10), run('g2', 2, 11)]
    expect(claimOrder([...acme, ...globex], { running: holding(1, 2), startable: null, projectCap: 3 })).toEqual(['g1', 'g2', 'a1'])
  })

  test('deferredRuns counts the due runs a project at its cap cannot start', () => {
    const due = [{ workflowId: 1, projectId: 1, concurrencyLimit: null, count: 3 }]
    expect(deferredRuns(due, holding(1, 3), 4, 2)).toEqual({ workflowLimit: 0, fairShare: 3 })
    expect(deferredRuns(due, holding(1, 3), 4, 1)).toEqual({ workflowLimit: 0, fairShare: 0 })
  })
})
