/**
 * The outage bench's figures per run and their tables: the recovery verdict
 * (the simulator's rule, by the simulator's own functions), goodput and peak
 * concurrency, for every strategy × side (simulator or real) × bare or
 * protected.
 */
import type { OutageParams, SecondStats } from '../../src/simulate/outage.js';
import type { Scenario } from './scenarios.js';

/** One run's per-second figures, from either side. */
export interface Run {
  side: string;
  protect: boolean;
  perSecond: SecondStats[];
  peak: number;
  calls: number;
  /** Real runs only: what the protections did. */
  protection?: { deferred: number; opened: number; budgetExhausted: number };
}

/** The recovery rule's functions (the simulator's, from the build). */
export interface RecoveryRule {
  baselineOkPerSecond: (perSecond: SecondStats[], p: OutageParams) => number;
  recoverySecond: (
    perSecond: SecondStats[],
    p: OutageParams,
    baseline: number,
  ) => number | undefined;
  serverRecoverySecond: (perSecond: SecondStats[], p: OutageParams) => number | undefined;
}

export interface Figures {
  recovered: boolean;
  recoveryMs: number | null;
  /** ok/s before the stop (outage), or over the whole run (overload). */
  baseline: number;
  /** Mean ok/s from the resume to the end (outage), or past the first 10 s (overload). */
  goodput: number;
  lastTen: number;
  timeouts: number;
  /**
   * From the resume to the first of 5 seconds in a row with the server's
   * concurrency at or under its limit (so its latency at the floor); null if
   * never. Robust where the recovery rule is not: ok/s ≥ 90 % for 10 s in a
   * row fails on Poisson noise alone (±10 around 100/s) once the server is
   * back.
   */
  serverBackMs: number | null;
}

const mean = (ps: SecondStats[]): number =>
  ps.length === 0 ? 0 : ps.reduce((n, s) => n + s.ok, 0) / ps.length;

/** The figures of one run. */
export function figures(
  scenario: Scenario,
  run: Run,
  p: OutageParams,
  rule: RecoveryRule,
): Figures {
  const ps = run.perSecond;
  const timeouts = ps.reduce((n, s) => n + s.timeouts, 0);
  const lastTen = mean(ps.slice(-10));
  if (scenario === 'overload') {
    return {
      recovered: false,
      recoveryMs: null,
      baseline: mean(ps),
      goodput: mean(ps.slice(10)),
      lastTen,
      timeouts,
      serverBackMs: null,
    };
  }
  const baseline = rule.baselineOkPerSecond(ps, p);
  const at = rule.recoverySecond(ps, p, baseline);
  const resume = p.stopAtMs + p.stopForMs;
  const sinceResume = (second: number | undefined): number | null =>
    second === undefined ? null : Math.max(0, second * 1000 - resume);
  return {
    recovered: at !== undefined,
    recoveryMs: sinceResume(at),
    baseline,
    goodput: mean(ps.slice(Math.ceil(resume / 1000))),
    lastTen,
    timeouts,
    serverBackMs: sinceResume(rule.serverRecoverySecond(ps, p)),
  };
}

const n = (x: number): string => x.toLocaleString('en-US');
const verdictOf = (f: Figures): string =>
  f.recovered
    ? `**recovered**, ${((f.recoveryMs ?? 0) / 1000).toFixed(1)} s after the resume`
    : '**not recovered**';
const protectionOf = (r: Run): string =>
  r.protection
    ? `${n(r.protection.opened)} / ${n(r.protection.deferred)} / ${n(r.protection.budgetExhausted)}`
    : '–';

/** The summary table: one row per strategy × run. */
export function summaryTable(
  scenario: Scenario,
  rows: { strategy: string; run: Run; f: Figures }[],
  best: number,
): string {
  if (scenario === 'overload') {
    return [
      "| strategy | side | protections | goodput (ok/s, 10 s to the end) | of the server's best | ok/s, last 10 s | peak concurrency | timeouts | requests the server got | breaker opened / deferred / budget empty |",
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
      ...rows.map(
        ({ strategy, run, f }) =>
          `| ${strategy} | ${run.side} | ${run.protect ? 'on' : 'off'} | ${f.goodput.toFixed(1)} | **${((100 * f.goodput) / best).toFixed(0)} %** | ${f.lastTen.toFixed(1)} | ${n(run.peak)} | ${n(f.timeouts)} | ${n(run.calls)} | ${protectionOf(run)} |`,
      ),
    ].join('\n');
  }
  return [
    '| strategy | side | protections | verdict | server back (≤ limit 5 s in a row) | ok/s before | goodput after the resume (ok/s) | ok/s, last 10 s | peak concurrency | timeouts | requests the server got | breaker opened / deferred / budget empty |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows.map(
      ({ strategy, run, f }) =>
        `| ${strategy} | ${run.side} | ${run.protect ? 'on' : 'off'} | ${verdictOf(f)} | ${f.serverBackMs === null ? 'never' : `${(f.serverBackMs / 1000).toFixed(0)} s`} | ${f.baseline.toFixed(1)} | ${f.goodput.toFixed(1)} | ${f.lastTen.toFixed(1)} | ${n(run.peak)} | ${n(f.timeouts)} | ${n(run.calls)} | ${protectionOf(run)} |`,
    ),
  ].join('\n');
}

/** Per second, the runs of one strategy side by side (⏸: the server is stopped). */
export function perSecondTable(runs: Run[], p: OutageParams): string {
  const label = (r: Run): string =>
    `${r.side.startsWith('simulator') ? 'sim' : 'real'}${r.protect ? ' P' : ''}`;
  const head = [
    't (s)',
    ...runs.map((r) => `ok ${label(r)}`),
    ...runs.map((r) => `timeouts ${label(r)}`),
    ...runs.map((r) => `concurrency ${label(r)}`),
  ];
  const rows = runs[0]!.perSecond.map((_, t) => {
    const down =
      p.stopForMs > 0 && t * 1000 >= p.stopAtMs - 999 && t * 1000 < p.stopAtMs + p.stopForMs;
    const at = (r: Run, k: 'ok' | 'timeouts' | 'concurrency'): number => r.perSecond[t]?.[k] ?? 0;
    return `| ${[
      `${t}${down ? ' ⏸' : ''}`,
      ...runs.map((r) => at(r, 'ok')),
      ...runs.map((r) => at(r, 'timeouts')),
      ...runs.map((r) => at(r, 'concurrency')),
    ].join(' | ')} |`;
  });
  return [`| ${head.join(' | ')} |`, `|${' --- |'.repeat(head.length)}`, ...rows].join('\n');
}
