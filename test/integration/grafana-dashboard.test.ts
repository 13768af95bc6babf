import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { repoRoot } from '../harness/child.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * The Grafana dashboard (docs/grafana/requeue.json) against what a running
 * service exports: every PromQL expression of every panel (and of the
 * `queue` variable) parses (`promtool check rules`), and every metric it
 * names is one the service's `/metrics` declares; every requeue_* metric the
 * service declares is on some panel.
 */

const dashboardPath = join(repoRoot, 'docs/grafana/requeue.json');

interface Panel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

/** Every panel's expressions, with the panel's title. */
function expressions(panels: Panel[]): { title: string; expr: string }[] {
  return panels.flatMap((p) => [
    ...(p.targets ?? []).flatMap((t) =>
      t.expr !== undefined ? [{ title: p.title ?? '?', expr: t.expr }] : [],
    ),
    ...expressions(p.panels ?? []),
  ]);
}

/** Grafana's variables replaced by values PromQL accepts. */
const concrete = (expr: string): string =>
  expr.replaceAll('$__rate_interval', '5m').replaceAll('$__interval', '1m');

const keywords = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);

/**
 * The metric names a PromQL expression reads: what is left of its words once
 * strings, label matchers, ranges, numbers and durations, groupings and
 * function calls are taken out.
 */
export function metricNames(expr: string): string[] {
  const bare = concrete(expr)
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b\d[\w.]*/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = [...bare.matchAll(/([a-zA-Z_:][\w:]*)(\s*\()?/g)]
    .filter((m) => m[2] === undefined && !keywords.has(m[1]!.toLowerCase()))
    .map((m) => m[1]!);
  return [...new Set(names)];
}

/** The series names an exposition declares: each `# TYPE`, and a histogram's or summary's parts. */
function declared(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m;
    names.add(name!);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name! + s);
    if (type === 'summary') for (const s of ['_sum', '_count']) names.add(name! + s);
  }
  return names;
}

function promtoolRules(file: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('promtool', ['check', 'rules', file]);
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (output += c));
    child.once('error', (err) => resolve({ code: null, output: `promtool: ${err.message}` }));
    child.once('close', (code) => resolve({ code, output }));
  });
}

describe('metricNames', () => {
  it('keeps the metrics and drops functions, labels, ranges, groupings and keywords', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (queue, le) (rate(a_bucket{queue=~"$queue", x="b c"}[$__rate_interval]))) / on (queue) b_total offset 5m and c',
      ),
    ).toEqual(['a_bucket', 'b_total', 'c']);
  });
});

describe('docs/grafana/requeue.json', () => {
  const hooks = uniqueQueueName('grafana-hooks');
  const jobs = uniqueQueueName('grafana-jobs');
  let service: RunningService;
  let redis: Redis;
  let exposition: string;

  beforeAll(async () => {
    redis = connect();
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: redisUrl(),
        webhooks: { queue: hooks, budget: {} },
        queues: [{ name: jobs, handler: 'examples/flaky-handler.mjs', breaker: {}, budget: {} }],
      },
      {},
    );
    service = await startService(config, createLogger({ level: 'silent' }));
    const res = await fetch(`${service.url}/metrics`);
    expect(res.status).toBe(200);
    exposition = await res.text();
  });

  afterAll(async () => {
    await service?.stop();
    await cleanQueue(redis, hooks);
    await cleanQueue(redis, jobs);
    redis.disconnect();
  });

  const dashboard = JSON.parse(readFileSync(dashboardPath, 'utf8')) as {
    panels: Panel[];
    templating: { list: { name: string; definition?: string }[] };
  };
  const exprs = [
    ...expressions(dashboard.panels),
    ...dashboard.templating.list.flatMap((v) =>
      v.definition !== undefined
        ? [
            {
              title: `$${v.name}`,
              expr: v.definition.replace(/^label_values\((.*),\s*\w+\)$/, '$1'),
            },
          ]
        : [],
    ),
  ];

  it('has a panel for throughput, retries, deaths, breakers, retry lateness, the DLQ and adaptive limits', () => {
    const used = new Set(exprs.flatMap((e) => metricNames(e.expr)));
    for (const name of [
      'requeue_jobs_completed_total',
      'requeue_retries_scheduled_total',
      'requeue_jobs_dead_lettered_total',
      'requeue_breaker_state',
      'requeue_retry_lateness_seconds_bucket',
      'requeue_dlq_jobs',
      'requeue_adaptive_limit_min',
    ])
      expect(used, name).toContain(name);
  });

  it('every expression parses (promtool check rules)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'requeue-grafana-'));
    try {
      const rules = exprs
        .map(
          (e, i) => `      - record: panel:${i}\n        expr: ${JSON.stringify(concrete(e.expr))}`,
        )
        .join('\n');
      const file = join(dir, 'rules.yml');
      await writeFile(file, `groups:\n  - name: requeue-dashboard\n    rules:\n${rules}\n`);
      const checked = await promtoolRules(file);
      expect(checked.output).toContain(`SUCCESS: ${exprs.length} rules found`);
      expect(checked.code).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('every metric a panel reads is one the running service declares', () => {
    const names = declared(exposition);
    const missing = exprs.flatMap((e) =>
      metricNames(e.expr)
        .filter((n) => !names.has(n))
        .map((n) => `${e.title}: ${n}`),
    );
    expect(missing).toEqual([]);
  });

  it('every requeue_* metric the service declares is on some panel', () => {
    const used = new Set(
      exprs.flatMap((e) => metricNames(e.expr)).map((n) => n.replace(/_(bucket|sum|count)$/, '')),
    );
    const families = [...exposition.matchAll(/^# TYPE (requeue_\S+) /gm)].map((m) => m[1]!);
    expect(families.length).toBeGreaterThan(15);
    expect(families.filter((f) => !used.has(f))).toEqual([]);
  });
});
