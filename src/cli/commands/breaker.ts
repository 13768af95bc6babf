import type { Command } from 'commander';
import { systemClock } from '../../util/system.js';
import { parseBreakerOptions } from '../../policy/breaker/breaker-options.js';
import { breakerStateView } from '../../policy/breaker/breaker-state.js';
import { parseBudgetOptions } from '../../policy/budget/budget-options.js';
import { BreakerStore, breakerStatusView, type BreakerStatus } from '../../redis/breaker-store.js';
import { BudgetStore, type BudgetStatus } from '../../redis/budget-store.js';
import { PauseStore } from '../../redis/pause-store.js';
import { queueBreakerKey } from '../../scheduler/requeue-worker.js';
import { CliUsageError, parseJsonFlag } from '../cli-error.js';
import { withCliRedis, withRedisOption } from '../connection-flag.js';
import { printTable } from '../table.js';
import { requireKnownQueue, someNames } from '../known-queue.js';
import type { RedisClient } from '../../redis/connection.js';

interface BreakerFlags {
  redis?: string;
  key?: string;
  breaker?: string;
  budget?: string;
  json?: boolean;
}

/** `requeue breaker status|open|close <queue> [--key K]` */
export function registerBreaker(program: Command): void {
  const breaker = program
    .command('breaker')
    .description("Show and control the circuit breaker shared by a queue's workers");

  common(breaker.command('status').description('State, window and budget of each breaker key'))
    .option('--json', 'print {"breakers": [...], "budget": {...}, "paused": [...]} as JSON')
    .action(async (queue: string, opts: BreakerFlags) => {
      await withStores(queue, opts, async (store, budget, pauseStore, redis) => {
        await requireKnownQueue(redis, queue);
        // Reads only: the windows are summed with the geometry stored with them,
        // so --breaker/--budget here never change what the workers see.
        const known = await store.knownKeys();
        // A key no worker has recorded and no one set is not "closed": it is unknown here.
        if (opts.key !== undefined && opts.key !== queueBreakerKey && !known.includes(opts.key))
          throw new CliUsageError(
            `--key: no breaker "${opts.key}" on ${queue}: never seen (known: ${someNames(known)})`,
          );
        const keys = opts.key !== undefined ? [opts.key] : known;
        const statuses: BreakerStatus[] = [];
        for (const key of keys.length > 0 ? keys : [queueBreakerKey])
          statuses.push(await store.status(key));
        const budgetStatus: BudgetStatus = await budget.status();
        // Keys paused by a 429's Retry-After (or job.pauseKey()) and not yet due.
        const now = systemClock.now();
        const paused = (await pauseStore.list())
          .filter((p) => p.until > now)
          .map((p) => ({ key: p.key, until: new Date(p.until).toISOString() }));
        if (opts.json) {
          process.stdout.write(
            JSON.stringify({
              queue,
              breakers: statuses.map(breakerStatusView),
              budget: budgetStatus,
              paused,
            }) + '\n',
          );
          return;
        }
        printTable(
          ['KEY', 'STATE', 'FAILURES/TOTAL', 'RATE', 'OPENED AT', 'HALF-OPEN AT', 'PROBES'],
          statuses.map((s) => {
            const view = breakerStateView(s.state);
            return [
              s.key,
              view.isolated ? 'open (isolated)' : view.state,
              `${s.window.failures}/${s.window.total}`,
              `${(s.window.failureRate * 100).toFixed(0)}%`,
              view.openedAt ? new Date(view.openedAt).toISOString() : '',
              view.halfOpenAt ? new Date(view.halfOpenAt).toISOString() : '',
              String(Object.keys(s.state.probes).length),
            ];
          }),
        );
        for (const p of paused) process.stdout.write(`paused: ${p.key} until ${p.until}\n`);
        process.stdout.write(
          budgetStatus.kind === 'token-bucket'
            ? `budget: ${budgetStatus.tokens}/${budgetStatus.capacity} tokens (${budgetStatus.denied} retries denied)\n`
            : `budget: ${budgetStatus.retries} retries / ${budgetStatus.requests} requests in the last ${budgetStatus.windowMs} ms (ratio ${budgetStatus.ratio})\n`,
        );
      });
    });

  common(
    breaker.command('open').description('Force the circuit open (isolate) until closed by hand'),
  ).action(async (queue: string, opts: BreakerFlags) => {
    await withStores(queue, opts, async (store) => {
      await store.forceOpen(opts.key ?? queueBreakerKey, systemClock.now());
      process.stdout.write(`opened ${queue}/${opts.key ?? queueBreakerKey} (isolated)\n`);
    });
  });

  common(
    breaker.command('close').description('Force the circuit closed (reset) and clear its window'),
  )
    .option('--reset-budget', 'also refill the retry budget')
    .action(async (queue: string, opts: BreakerFlags & { resetBudget?: boolean }) => {
      await withStores(queue, opts, async (store, budget) => {
        await store.forceClose(opts.key ?? queueBreakerKey);
        if (opts.resetBudget) await budget.reset();
        process.stdout.write(`closed ${queue}/${opts.key ?? queueBreakerKey}\n`);
      });
    });
}

function common(command: Command): Command {
  return withRedisOption(
    command
      .argument('<queue>', 'queue name')
      .option('--key <key>', `breaker key (default: the queue's own, "${queueBreakerKey}")`)
      .option(
        '--breaker <json>',
        "the workers' breaker options (status reads the window's own geometry)",
      )
      .option('--budget <json>', "the workers' budget options, for the token bucket's capacity"),
  );
}

async function withStores(
  queue: string,
  opts: BreakerFlags,
  fn: (
    store: BreakerStore,
    budget: BudgetStore,
    pauses: PauseStore,
    redis: RedisClient,
  ) => Promise<void>,
): Promise<void> {
  const breakerOptions = parseBreakerOptions(
    opts.breaker ? parseJsonFlag('--breaker', opts.breaker) : {},
    '--breaker',
  );
  const budgetOptions = parseBudgetOptions(
    opts.budget ? parseJsonFlag('--budget', opts.budget) : {},
    '--budget',
  );
  await withCliRedis(opts, (redis) =>
    fn(
      new BreakerStore(redis, queue, breakerOptions),
      new BudgetStore(redis, queue, budgetOptions),
      new PauseStore(redis, queue),
      redis,
    ),
  );
}
