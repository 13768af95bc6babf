import type { Command } from 'commander';
import { LimitStore, type KeyLimitView } from '../../redis/limit-store.js';
import { parseNumberFlag } from '../cli-error.js';
import { withCliRedis, withRedisOption } from '../connection-flag.js';
import { printTable } from '../table.js';
import { requireKnownQueue } from '../known-queue.js';

interface LimitsFlags {
  redis?: string;
  max?: string;
  json?: boolean;
}

/** The JSON form of one key: what `--json` and the admin API print. */
export function keyLimitJson(view: KeyLimitView) {
  return {
    key: view.key,
    limit: view.limit,
    admits: view.limit === null ? null : Math.floor(view.limit),
    threshold: view.threshold,
    inFlight: view.inFlight,
    decreasedAt: view.decreasedAt > 0 ? new Date(view.decreasedAt).toISOString() : null,
  };
}

/** `requeue limits <queue> [--max N] [--json]` */
export function registerLimits(program: Command): void {
  withRedisOption(
    program
      .command('limits')
      .description(
        "Adaptive concurrency per key: each key's learned limit and its attempts in flight across the fleet",
      )
      .argument('<queue>', 'queue name')
      .option('--max <n>', 'show at most this many keys, those touched last first', '100')
      .option('--json', 'print {"queue", "keys": n, "limits": [...]} as JSON'),
  ).action(async (queue: string, opts: LimitsFlags) => {
    const max = parseNumberFlag('--max', opts.max ?? '100', { integer: true, min: 1, max: 10_000 });
    await withCliRedis(opts, async (redis) => {
      await requireKnownQueue(redis, queue);
      // Reads only (ZCARD, ZREVRANGE, HMGET, ZCOUNT, TIME).
      const store = new LimitStore(redis, queue);
      const [count, views] = await Promise.all([store.count(), store.list(max)]);
      if (opts.json) {
        process.stdout.write(
          JSON.stringify({ queue, keys: count, limits: views.map(keyLimitJson) }) + '\n',
        );
        return;
      }
      if (views.length === 0) {
        process.stdout.write(
          `no key of ${queue} has adaptive-concurrency state (every key runs at its initial limit)\n`,
        );
        return;
      }
      printTable(
        ['KEY', 'LIMIT', 'IN FLIGHT', 'THRESHOLD', 'LAST DECREASE'],
        views.map((v) => {
          const j = keyLimitJson(v);
          return [
            v.key,
            v.limit === null ? 'initial' : `${j.admits} (${v.limit.toFixed(2)})`,
            String(v.inFlight),
            v.threshold === null ? '' : v.threshold.toFixed(2),
            j.decreasedAt ?? '',
          ];
        }),
      );
      if (count > views.length)
        process.stdout.write(`… ${count - views.length} more keys (--max)\n`);
    });
  });
}
