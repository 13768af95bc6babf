/**
 * `npm run bench:breaker -- --only flaky [--reference <checkout>]`: the
 * breaker against a flaky endpoint, the five-endpoint mix, a down endpoint
 * and a burst, for this checkout and, side by side in the same run, another
 * commit's built checkout (`git worktree add --detach /tmp/ref <commit>`,
 * `ln -s $PWD/node_modules /tmp/ref/`, `npm run build` there). Writes its
 * own section of bench/RESULTS.md.
 */
import { basename } from 'node:path';
import { format, resolveConfig } from 'prettier';
import { startRedisServer } from '../src/redis/redis-server.js';
import { measureBurst, type BurstSample } from './breaker-burst.js';
import { runFlakyCase, type FlakyCaseId, type FlakyResult } from './breaker-flaky.js';
import { writeResultsSection } from './support/results-file.js';
import type { Machine } from './support/machine.js';

export interface ScenarioOptions {
  /** Checkouts to run, this one first. */
  roots: string[];
  bursts: number;
  cases: FlakyCaseId[];
  resultsPath: string | undefined;
  command: string;
  machine: Machine;
  log: (line: string) => void;
}

interface Side {
  root: string;
  bursts: BurstSample[];
  cases: FlakyResult[];
}

/** Runs every scenario on every checkout, alternating them, and writes the section. */
export async function runScenarios(options: ScenarioOptions): Promise<void> {
  const started = new Date();
  const sides: Side[] = options.roots.map((root) => ({ root, bursts: [], cases: [] }));
  const redis = await startRedisServer({ appendonly: false });
  try {
    for (let i = 0; i < options.bursts; i += 1)
      for (const side of sides) {
        const sample = await measureBurst({
          redisUrl: redis.url,
          queueName: `bench-burst-${i}-${sides.indexOf(side)}`,
          workers: 2,
          concurrency: 10,
          minimumRequests: 10,
          jobs: 500,
          root: side.root,
        });
        side.bursts.push(sample);
        options.log(`burst ${basename(side.root)}: ${JSON.stringify(sample)}`);
      }
  } finally {
    await redis.stop();
  }
  for (const caseId of options.cases)
    for (const side of sides) {
      // A fresh Redis per case: every process uses the default `webhooks` queue.
      const server = await startRedisServer({ appendonly: false });
      try {
        const result = await runFlakyCase(caseId, server.url, side.root);
        side.cases.push(result);
        options.log(`${caseId} ${basename(side.root)}: ${JSON.stringify(result)}`);
      } finally {
        await server.stop();
      }
    }
  const body = render(sides, options, started);
  process.stdout.write(`\n${body}\n`);
  if (options.resultsPath === undefined) return;
  const config = await resolveConfig(options.resultsPath);
  const formatted = await format(body, { ...config, parser: 'markdown' });
  await writeResultsSection(options.resultsPath, 'breaker-flaky-bench', formatted);
  options.log(`wrote ${options.resultsPath}`);
}

const caseLabels: Record<FlakyCaseId, string> = {
  flaky: 'flaky endpoint, 300 events (503 first, 200 on retry), webhook worker defaults',
  mix: 'five-endpoint mix, 1,000 webhooks (60 % fail first: 503 ×1–3 or 429 `Retry-After: 1`), service defaults',
  'mix-503': 'the same mix with 503 in place of every 429 (no pauses), service defaults',
  down: 'down endpoint (503 to everything), 300 events, webhook worker defaults',
};

function render(sides: Side[], options: ScenarioOptions, started: Date): string {
  const names = sides.map((s, i) => (i === 0 ? 'this branch' : `reference (${basename(s.root)})`));
  const row = (cells: string[]) => `| ${cells.join(' | ')} |`;
  const lines = [
    '## Circuit breaker: flaky is not down',
    '',
    `Written by \`bench/breaker-scenarios.ts\` on ${started.toISOString()}. Command: \`${options.command}\``,
    '',
    `- Machine: \`${options.machine.uname}\`; ${options.machine.cores} cores; load average ${options.machine.loadAverage.toFixed(2)} at start`,
    `- Node ${options.machine.node}; redis-server ${options.machine.redis}, private, one per case`,
    '- Every case runs on each checkout in turn, in the same run; 60 s per case from the first enqueue.',
    '',
    row(['case', ...names]),
    row(['---', ...names.map(() => '---')]),
  ];
  for (const caseId of options.cases) {
    const cells = sides.map((s) => {
      const r = s.cases.find((c) => c.case === caseId);
      if (!r) return '—';
      if (caseId === 'down')
        return `${r.requests} requests in 60 s, ${r.opens} openings; after the first: ${r.afterOpen?.requests ?? '?'} in ${((r.afterOpen?.spanMs ?? 0) / 1000).toFixed(0)} s`;
      const all =
        r.allDeliveredMs === undefined ? '' : ` (all in ${(r.allDeliveredMs / 1000).toFixed(1)} s)`;
      return `${r.delivered}/${r.events} in 60 s${all}, ${r.requests} requests, ${r.opens} openings`;
    });
    lines.push(row([caseLabels[caseId], ...cells]));
  }
  if (options.bursts > 0)
    lines.push(
      row([
        'burst: calls the dependency received (before the opening / in all), 2 workers × concurrency 10, `minimumRequests` 10, every call 503; bound 10 + 20 in flight = 30',
        ...sides.map((s) => s.bursts.map((b) => `${b.beforeOpen}/${b.total}`).join(', ')),
      ]),
    );
  lines.push(
    '',
    '- Flaky, mix, down: `dist/workers/webhook/main.js` or `dist/workers/service/main.js` of each checkout with its defaults (only `REDIS_URL`, `WEBHOOK_ALLOW_PRIVATE=true`, `PORT=0`); receivers on loopback count each event’s first 2xx. Openings: `breaker opened` log lines.',
    '- Burst: `test/fixtures/breaker-worker.ts` of each checkout (`createWorker`, breaker `{"minimumRequests":10}`, default policy), 500 jobs added at once, the dependency of `test/fixtures/breaker-dependency.ts` failing every call; "before the opening": calls started before the state’s `openedAt`; "in all": every call up to 2 s after it.',
    '',
  );
  return lines.join('\n');
}
