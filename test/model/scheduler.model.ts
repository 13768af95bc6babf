/**
 * The model-based suite (issue 8, item 10): random sequences of adds,
 * handler behaviours, worker SIGKILLs, Redis restarts and operator commands
 * against a real Redis and real worker processes, checked against a model at
 * quiescence. Run it with `npm run test:model -- --seed S --runs N` (see
 * test/model/run.ts for every flag); a failure prints the seed, the path and
 * the shrunk command sequence, and the command that replays it.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, it } from 'vitest';
import type { RedisServerHandle } from '../../src/redis/redis-server.js';
import { settleAndCheck } from './check.js';
import { commandArbs } from './commands.js';
import { Model } from './model.js';
import { RealSystem, startModelRedis, type RunConfig } from './system.js';

const env = process.env;
const seed = env.MODEL_SEED !== undefined ? Number(env.MODEL_SEED) : Date.now() % 2 ** 31;
const numRuns = Number(env.MODEL_RUNS ?? '10');
const path = env.MODEL_PATH || undefined;
const replayPath = env.MODEL_REPLAY_PATH || undefined;
const maxCommands = Number(env.MODEL_MAX_COMMANDS ?? '12');
const quiesceMs = Number(env.MODEL_QUIESCE_MS ?? '20000');
const timeLimitMs = env.MODEL_TIME_LIMIT_MS ? Number(env.MODEL_TIME_LIMIT_MS) : undefined;
const without = new Set((env.MODEL_WITHOUT ?? '').split(',').filter(Boolean));

const configArb: fc.Arbitrary<RunConfig> = fc.record({
  workers: fc.integer({ min: 1, max: 2 }),
  concurrency: fc.integer({ min: 1, max: 3 }),
  maxAttempts: fc.integer({ min: 3, max: 4 }),
  baseMs: fc.integer({ min: 5, max: 20 }),
  breaker: without.has('breaker-config') ? fc.constant(false) : fc.boolean(),
  retryOrder: fc.constantFrom('first' as const, 'fifo' as const),
  keySlots: fc.boolean(),
});

/** Thrown by a run whose system disagrees with the model. */
class ModelViolation extends Error {
  override name = 'ModelViolation';
}

let server: RedisServerHandle;

beforeAll(async () => {
  server = await startModelRedis();
});

afterAll(async () => {
  await server?.stop();
});

/** The failing run's own message (fast-check's report leaves it out unless verbose). */
function errorText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** The command line that runs exactly this failure again. */
function reproduce(details: {
  seed: number;
  counterexamplePath: string | null;
  counterexample: readonly unknown[] | null;
}): string {
  const shown = details.counterexample ? String(details.counterexample[1]) : '';
  const replay = /replayPath="([^"]*)"/.exec(shown)?.[1];
  const parts = [`npm run test:model -- --seed ${details.seed}`];
  if (details.counterexamplePath) parts.push(`--path ${details.counterexamplePath}`);
  if (replay) parts.push(`--replay-path '${replay}'`);
  if (without.size > 0) parts.push(`--without ${[...without].join(',')}`);
  if (env.MODEL_MAX_COMMANDS) parts.push(`--max-commands ${maxCommands}`);
  return parts.join(' ');
}

it('every job ends completed or dead, once, whatever handlers, crashes, Redis and operators do', async () => {
  let run = 0;
  const property = fc.asyncProperty(
    configArb,
    fc.commands(commandArbs(without), {
      maxCommands,
      size: 'max',
      ...(replayPath ? { replayPath } : {}),
    }),
    async (config, cmds) => {
      run += 1;
      const startedAt = Date.now();
      const real = new RealSystem(server, config);
      const model = new Model(config);
      try {
        await real.start();
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        const violations = await settleAndCheck(model, real, quiesceMs);
        console.log(
          `[model] run ${run}: ${JSON.stringify(config)} ${model.step} commands, ${model.jobs.size} jobs, ` +
            `${violations.length} violations, ${Date.now() - startedAt} ms`,
        );
        if (violations.length > 0) console.log(`    - ${violations.slice(0, 5).join('\n    - ')}`);
        if (env.MODEL_VERBOSE) console.log(`    ${real.journal.join('\n    ')}`);
        if (model.notes.includes('keyless-ids')) {
          console.log('[model] note: keyless adds got ids that are not newJobId ids');
        }
        if (violations.length > 0 && env.MODEL_MONITOR) {
          const file = join(env.MODEL_MONITOR, `seed-${seed}-run-${run}.txt`);
          writeFileSync(file, `${violations.join('\n')}\n\n${real.monitorLog().join('\n')}\n`);
          console.log(`[model] every Redis command of run ${run}: ${file}`);
        }
        if (violations.length > 0) {
          throw new ModelViolation(
            `${violations.length} violation(s):\n  - ${violations.join('\n  - ')}\n` +
              `what happened:\n    ${real.journal.join('\n    ')}` +
              (real.stderr() ? `\nworker stderr:\n${real.stderr()}` : ''),
          );
        }
      } finally {
        await real.stop();
      }
    },
  );
  console.log(`[model] seed ${seed}, ${numRuns} runs, at most ${maxCommands} commands each`);
  const details = await fc.check(property, {
    seed,
    numRuns,
    ...(path ? { path } : {}),
    ...(timeLimitMs ? { interruptAfterTimeLimit: timeLimitMs, markInterruptAsFailure: false } : {}),
  });
  if (details.interrupted && !details.failed) {
    console.log(`[model] stopped by the time limit after ${details.numRuns} runs`);
  }
  if (details.failed) {
    throw new Error(
      `${fc.defaultReportMessage(details)}\n\n${errorText(details.errorInstance)}\n\nReproduce with:\n  ${reproduce(details)}\n`,
    );
  }
});
