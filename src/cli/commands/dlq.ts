import type { Command } from 'commander';
import { deadReasons, type DeadReason } from '../../errors/dead-reason.js';
import {
  DeadLetterQueue,
  type DeadJobFilter,
  type DeadJobRecord,
} from '../../scheduler/dlq/dead-letter-queue.js';
import { CliUsageError, parseNumberFlag, parseTimeFlag } from '../cli-error.js';
import { withCliRedis, withRedisOption } from '../connection-flag.js';
import { ProgressBar } from '../progress.js';
import { requireKnownQueue } from '../known-queue.js';
import { printTable, truncate } from '../table.js';
import { redactText, redactValue } from '../../util/redact.js';
import { limits } from '../../policy/limits.js';
import { redactOptionsFromEnv } from '../../config/env.js';

interface FilterFlags {
  id?: string;
  reason?: string;
  name?: string;
  since?: string;
  until?: string;
  all?: boolean;
}

/** `requeue dlq list|show|count|replay|purge|trim` */
export function registerDlq(program: Command): void {
  const dlq = program.command('dlq').description('Inspect, replay and purge dead jobs');

  filterOptions(
    withRedisOption(
      dlq
        .command('list')
        .description('List dead jobs, newest first')
        .argument('<queue>', 'source queue name')
        .option('--limit <n>', 'at most this many', '50')
        .option('--offset <n>', 'skip this many first', '0')
        .option('--json', 'print an array of dead jobs as JSON'),
    ),
  ).action(async (queue: string, opts) => {
    const limit = parseNumberFlag('--limit', opts.limit, {
      integer: true,
      min: 1,
      max: limits.listLimit,
    });
    const offset = parseNumberFlag('--offset', opts.offset, {
      integer: true,
      min: 0,
      max: limits.retentionCount,
    });
    // Flags first: a bad --reason is said before the queue is looked for.
    const filter = toFilter(opts);
    await readDlq(queue, opts, async (dead) => {
      const records = await dead.list(filter, { limit, offset });
      if (opts.json) {
        process.stdout.write(
          JSON.stringify(redactValue(records.map(listEntry), redactOptionsFromEnv())) + '\n',
        );
        return;
      }
      if (records.length === 0) {
        process.stdout.write('no dead jobs\n');
        return;
      }
      const rows = records.map((r) => [
        r.id,
        r.name,
        r.reason,
        String(r.attempts),
        new Date(r.deadAt).toISOString(),
        truncate(redactText(r.message), 60),
      ]);
      printTable(['ID', 'NAME', 'REASON', 'ATTEMPTS', 'DEAD AT', 'LAST ERROR'], rows);
    });
  });

  withRedisOption(
    dlq
      .command('show')
      .description('Show one dead job with its whole attempt history')
      .argument('<queue>', 'source queue name')
      .argument('<id>', 'job id')
      .option('--json', 'print the dead job as JSON'),
  ).action(async (queue: string, id: string, opts) => {
    await readDlq(queue, opts, async (dead) => {
      const record = await dead.get(id);
      if (!record) throw new CliUsageError(`no dead job "${id}" in ${queue}'s DLQ`);
      if (opts.json) {
        process.stdout.write(JSON.stringify(redactValue(record, redactOptionsFromEnv())) + '\n');
        return;
      }
      const out = process.stdout;
      out.write(`${record.id}  ${record.name}  (${record.source})\n`);
      out.write(`reason:      ${record.reason}: ${redactText(record.message)}\n`);
      if (record.idempotencyKey) out.write(`key:         ${record.idempotencyKey}\n`);
      if (record.firstFailedAt)
        out.write(`first fail:  ${new Date(record.firstFailedAt).toISOString()}\n`);
      out.write(`dead at:     ${new Date(record.deadAt).toISOString()}\n`);
      out.write(`attempts:    ${record.attempts}  replays: ${record.replays}\n`);
      out.write(
        `data:        ${truncate(JSON.stringify(redactValue(record.data, redactOptionsFromEnv())), 200)}\n\n`,
      );
      printTable(
        ['#', 'STARTED', 'OUTCOME', 'ERROR', 'DECISION', 'DELAY'],
        record.history.map((h) => [
          `${h.replay ? `${h.replay}.` : ''}${h.attempt}`,
          new Date(h.startedAt).toISOString(),
          h.outcome,
          truncate(
            redactText(
              `${h.error?.class ?? ''}${h.error?.status ? ` ${h.error.status}` : ''}: ${h.error?.message ?? ''}`,
            ),
            50,
          ),
          h.decision === 'dead-letter' ? `dead (${h.deadReason})` : h.decision,
          h.delayMs !== undefined ? `${Math.round(h.delayMs)}ms` : '',
        ]),
      );
    });
  });

  filterOptions(
    withRedisOption(
      dlq
        .command('count')
        .description('Count dead jobs')
        .argument('<queue>', 'source queue name')
        .option('--json', 'print {"dead": N}'),
    ),
  ).action(async (queue: string, opts) => {
    const filter = toFilter(opts);
    await readDlq(queue, opts, async (dead) => {
      const n = await dead.count(filter);
      process.stdout.write(opts.json ? JSON.stringify({ dead: n }) + '\n' : `${n}\n`);
    });
  });

  bulkCommand(
    dlq,
    'replay',
    'Move dead jobs back to the source queue with fresh attempts, history kept',
  )
    .option('--rate <n>', 'at most this many jobs per second')
    .action(async (queue: string, opts) => {
      const filter = toBulkFilter(opts);
      const ratePerSec =
        opts.rate === undefined
          ? undefined
          : parseNumberFlag('--rate', opts.rate, { min: 0.001, max: 1_000_000 });
      await runBulk(queue, opts, filter, 'replayed', (dead, onProgress, signal) =>
        dead.replay(filter, {
          onProgress,
          signal,
          ...(ratePerSec !== undefined ? { ratePerSec } : {}),
        }),
      );
    });

  bulkCommand(dlq, 'purge', 'Delete dead jobs for good').action(async (queue: string, opts) => {
    const filter = toBulkFilter(opts);
    await runBulk(queue, opts, filter, 'purged', (dead, onProgress, signal) =>
      dead.purge(filter, { onProgress, signal }),
    );
  });

  withRedisOption(
    dlq
      .command('trim')
      .description('Apply the retention (age and count) now')
      .argument('<queue>', 'source queue name')
      .option('--max-age-days <days>', 'drop dead jobs older than this', '180')
      .option('--max-count <n>', 'keep at most this many', '10000'),
  ).action(async (queue: string, opts) => {
    const days = parseNumberFlag('--max-age-days', opts.maxAgeDays, { min: 0.0001, max: 3650 });
    const maxCount = parseNumberFlag('--max-count', opts.maxCount, {
      integer: true,
      min: 1,
      max: limits.retentionCount,
    });
    await withCliRedis(opts, async (redis) => {
      const dead = new DeadLetterQueue(queue, {
        connection: redis,
        retention: { maxAgeMs: Math.round(days * 86_400_000), maxCount },
      });
      try {
        const { byAge, byCount } = await dead.trim();
        process.stdout.write(
          `removed ${byAge + byCount} dead jobs (${byAge} older than ${days} days, ${byCount} beyond ${maxCount})\n`,
        );
      } finally {
        await dead.close();
      }
    });
  });
}

function filterOptions(command: Command): Command {
  return command
    .option('--reason <reason>', `only this reason (${deadReasons.join(', ')})`)
    .option('--name <name>', 'only jobs of this name')
    .option('--since <time>', 'only jobs dead at or after this time (ISO date or ms)')
    .option('--until <time>', 'only jobs dead before this time (ISO date or ms)');
}

function bulkCommand(dlq: Command, name: string, description: string): Command {
  return filterOptions(
    withRedisOption(
      dlq
        .command(name)
        .description(description)
        .argument('<queue>', 'source queue name')
        .option('--id <id>', 'one job')
        .option('--all', 'every dead job (or every one the other filters match)')
        .option('--json', 'print {"done": N, "total": N} (replay adds "renamed": [{from, to}])'),
    ),
  );
}

function toFilter(opts: FilterFlags): DeadJobFilter {
  const filter: DeadJobFilter = {};
  if (opts.id !== undefined) filter.id = opts.id;
  if (opts.reason !== undefined) {
    if (!(deadReasons as readonly string[]).includes(opts.reason)) {
      throw new CliUsageError(
        `--reason: expected one of ${deadReasons.join(', ')}, got "${opts.reason}"`,
      );
    }
    filter.reason = opts.reason as DeadReason;
  }
  if (opts.name !== undefined) filter.name = opts.name;
  if (opts.since !== undefined) filter.since = parseTimeFlag('--since', opts.since);
  if (opts.until !== undefined) filter.until = parseTimeFlag('--until', opts.until);
  return filter;
}

/** Replay and purge act on everything only when asked to with `--all`. */
function toBulkFilter(opts: FilterFlags): DeadJobFilter {
  const filter = toFilter(opts);
  if (!opts.all && opts.id === undefined && opts.reason === undefined) {
    throw new CliUsageError('give --id <id>, --reason <reason> or --all');
  }
  return filter;
}

/** {@link withDlq} for a command that reads: an unknown queue is refused (exit code 2). */
function readDlq<T>(
  queue: string,
  opts: { redis?: string },
  fn: (dead: DeadLetterQueue) => Promise<T>,
): Promise<T> {
  return withDlq(queue, opts, fn, true);
}

async function withDlq<T>(
  queue: string,
  opts: { redis?: string },
  fn: (dead: DeadLetterQueue) => Promise<T>,
  mustBeKnown = false,
): Promise<T> {
  return withCliRedis(opts, async (redis) => {
    if (mustBeKnown) await requireKnownQueue(redis, queue);
    const dead = new DeadLetterQueue(queue, { connection: redis });
    try {
      return await fn(dead);
    } finally {
      await dead.close();
    }
  });
}

async function runBulk(
  queue: string,
  opts: { redis?: string; json?: boolean },
  filter: DeadJobFilter,
  verb: string,
  run: (
    dead: DeadLetterQueue,
    onProgress: (p: { done: number; total: number }) => void,
    signal: AbortSignal,
  ) => Promise<{ done: number; total: number; renamed?: { from: string; to: string }[] }>,
): Promise<void> {
  const bar = new ProgressBar(verb === 'replayed' ? 'replay' : 'purge');
  // Ctrl-C stops after the current batch: what is done stays done, a rerun finishes the rest.
  const abort = new AbortController();
  const onSignal = (): void => abort.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // The bar's redraw timer must not outlive a failed run.
    const result = await withDlq(queue, opts, (dead) =>
      run(dead, (p) => bar.update(p.done, p.total), abort.signal),
    ).finally(() => bar.finish());
    // A named job that is not there is an error, as for `dlq show`; a filter that matches
    // nothing (--reason, --all) is nothing to do, and says so.
    if (result.total === 0 && filter.id !== undefined)
      throw new CliUsageError(
        `--id: no dead job "${filter.id}" in ${queue}'s DLQ${filterText(filter)}`,
      );
    if (opts.json) {
      process.stdout.write(JSON.stringify(result) + '\n');
      return;
    }
    if (result.total === 0) {
      const matching = filterText(filter);
      process.stdout.write(
        `${verb} 0 dead jobs: ${matching === '' ? 'the DLQ is empty' : `none${matching}`}\n`,
      );
      return;
    }
    const skipped = abort.signal.aborted ? 0 : result.total - result.done;
    process.stdout.write(
      `${verb} ${result.done} dead job${result.done === 1 ? '' : 's'}` +
        (abort.signal.aborted ? ' (interrupted; run again to finish)' : '') +
        (skipped > 0 ? ` (${skipped} skipped: gone, or dead again since this run began)` : '') +
        '\n',
    );
    for (const { from, to } of result.renamed ?? [])
      process.stdout.write(`replayed ${from} as ${to}: its id is taken in the source queue\n`);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** The filters besides the id, as flags, for "nothing matched" lines. */
function filterText(filter: DeadJobFilter): string {
  const parts: string[] = [];
  if (filter.reason !== undefined) parts.push(`--reason ${filter.reason}`);
  if (filter.name !== undefined) parts.push(`--name ${JSON.stringify(filter.name)}`);
  if (filter.since !== undefined) parts.push(`--since ${new Date(filter.since).toISOString()}`);
  if (filter.until !== undefined) parts.push(`--until ${new Date(filter.until).toISOString()}`);
  return parts.length > 0 ? ` matching ${parts.join(' ')}` : '';
}

function listEntry(r: DeadJobRecord) {
  return {
    id: r.id,
    gen: r.gen,
    name: r.name,
    data: r.data,
    reason: r.reason,
    attempts: r.attempts,
    history: r.history,
    deadAt: r.deadAt,
    message: r.message,
    source: r.source,
    idempotencyKey: r.idempotencyKey,
    firstFailedAt: r.firstFailedAt,
    replays: r.replays,
  };
}
