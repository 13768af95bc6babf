/**
 * Webhook isolation, measured from outside (issue 13, item 7): healthy
 * endpoints' delivery latency (enqueue → the receiver gets the request),
 * p50/p99, with nothing wrong and with one endpoint that refuses
 * connections, answers 503, answers 429 with `Retry-After`, or hangs, and
 * with a population of flaky receivers (each event fails 1–3 times first,
 * 503 or 429 with `Retry-After: 1`): how long until all are delivered, and
 * how many twice. For the standalone worker (`node dist/workers/webhook/main.js`)
 * and the service (`node dist/workers/service/main.js`, webhooks enqueued
 * through `POST /v1/webhooks`), each a real child process with its default
 * settings (only Redis and "private destinations allowed" are set), a fresh
 * one per case, against one private redis-server flushed between cases, the
 * receivers on loopback in this process.
 *
 * Run with `npm run bench:webhooks` (`--help` for the options); writes its
 * section of bench/RESULTS.md and, with `--json`, the JSON on stdout.
 */
import { mkdtemp, readFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
// The built package, as users run it (`npm run build` first; the bench script does).
import { webhookBreakerDefaults, webhookWorkerDefaults } from 'requeue/webhook';
import { printTable } from '../src/cli/table.js';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer } from '../src/redis/redis-server.js';
import { describeMachine } from './support/machine.js';
import { writeResultsSection } from './support/results-file.js';
import { renderFanout, runFanout } from './webhook-fanout.js';
import { renderOutage, runOutage } from './webhook-outage.js';
import { describeRevision } from './support/revision.js';
import { usage, modeLabels, parseOptions } from './webhooks/options.js';
import { runCase, type CaseResult } from './webhooks/run-case.js';
import { ms, evaluate, tableRows, renderMarkdown, type Report } from './webhooks/report.js';

function commandLine(): string {
  const script = relative(process.cwd(), process.argv[1] ?? 'bench/webhooks.bench.ts');
  const node = ['node', ...process.execArgv, script, ...process.argv.slice(2)].join(' ');
  return process.env.npm_lifecycle_event === 'bench:webhooks'
    ? `npm run bench:webhooks → ${node}`
    : node;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

async function main(): Promise<void> {
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${usage}`);
    process.exitCode = 2;
    return;
  }
  if (parsed === 'help') {
    process.stdout.write(usage);
    return;
  }
  if ('render' in parsed) {
    const saved = JSON.parse(await readFile(parsed.render, 'utf8')) as Report;
    saved.goals = evaluate(saved.results);
    await writeResultsSection(parsed.resultsPath, 'webhooks-bench', renderMarkdown(saved));
    log(`wrote ${parsed.resultsPath} from ${parsed.render}`);
    return;
  }
  const options = parsed;
  const startedAt = new Date();
  const clockStart = performance.now();
  const logDir = await mkdtemp(join(tmpdir(), 'requeue-bench-webhooks-'));
  const server = await startRedisServer({ appendonly: false });
  const admin = createRedis(server.url);
  try {
    const machine = await describeMachine(admin);
    // Read before the runs: the tree may change while they go on.
    const revision = describeRevision(['src', 'workers']);
    log(`redis ${machine.redis} at ${server.url}; child logs in ${logDir}`);
    const results: CaseResult[] = [];
    if (options.outage) {
      const report = await runOutage(server.url, admin, options.outage, log);
      const context = `\`${commandLine()}\`, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${machine.cpuModel} × ${machine.cores} cores, Node ${machine.node}, Redis ${machine.redis} (a private server, appendonly no), load average ${machine.loadAverage.toFixed(1)} at the start and ${(loadavg()[0] ?? 0).toFixed(1)} at the end; one webhook worker in the bench's process with its defaults (only \`allowPrivate\` and the registry set), the receiver in the same process.`;
      const body = renderOutage(report, context);
      process.stdout.write(`${body}\n`);
      if (options.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      if (options.resultsPath !== undefined)
        await writeResultsSection(
          options.resultsPath,
          // One section per outage length: a short one beside the full one.
          `webhooks-outage-${Math.round(options.outage.outageMs / 1000)}s`,
          body,
        );
      if (options.onlyOutage) return;
    }
    if (options.fanout > 0 && !options.onlyOutage) {
      const fanout = await runFanout(server.url, admin, options.fanout);
      const context = `\`${commandLine()}\`, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${machine.cpuModel} × ${machine.cores} cores, Node ${machine.node}, Redis ${machine.redis} (a private server), load average ${machine.loadAverage.toFixed(1)} at the start; one webhook worker in the bench's process with its defaults, a loopback receiver, each of the ${options.fanout.toLocaleString('en-US')} endpoints registered with no type filter.`;
      const body = renderFanout(fanout, context);
      process.stdout.write(`${body}\n`);
      if (options.resultsPath !== undefined)
        await writeResultsSection(options.resultsPath, 'webhooks-fanout', body);
      if (options.onlyFanout) return;
    }
    for (const mode of options.modes)
      for (const caseId of options.cases) {
        await admin.flushall();
        const r = await runCase(mode, caseId, server.url, logDir, options);
        results.push(r);
        log(
          `${modeLabels[mode].padEnd(17)} ${caseId.padEnd(8)} healthy ${r.healthy.delivered}/${r.healthy.sent} ` +
            `p50 ${ms(r.healthy.p50)} p99 ${ms(r.healthy.p99)} max ${ms(r.healthy.max)}` +
            (r.flaky
              ? `; flaky ${r.flaky.delivered}/${r.flaky.sent} all in ${ms(r.flaky.allDeliveredMs)}, ${r.flaky.duplicates} twice`
              : '') +
            ` (${ms(r.elapsedMs)})`,
        );
      }
    const report: Report = {
      startedAt: startedAt.toISOString(),
      durationS: (performance.now() - clockStart) / 1000,
      command: commandLine(),
      revision,
      machine,
      loadAfter: loadavg()[0] ?? 0,
      options,
      defaults: { worker: webhookWorkerDefaults, breaker: webhookBreakerDefaults },
      results,
      goals: evaluate(results),
    };
    // With --json, stdout carries the JSON alone and the table goes to stderr.
    const out = options.json ? process.stderr : process.stdout;
    out.write('\n');
    const { header, rows } = tableRows(report);
    printTable(header, rows, out);
    out.write('\n');
    for (const g of report.goals)
      out.write(
        `${g.met ? 'met   ' : 'MISSED'}  ${modeLabels[g.mode]}, ${g.case}: ${g.goal}; ${g.detail}\n`,
      );
    if (options.resultsPath !== undefined) {
      await writeResultsSection(options.resultsPath, 'webhooks-bench', renderMarkdown(report));
      log(`wrote ${options.resultsPath}`);
    }
    if (options.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    admin.disconnect();
    await server.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
