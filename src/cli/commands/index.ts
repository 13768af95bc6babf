import type { Command } from 'commander';

type Register = (program: Command) => void;

/**
 * Every command, by name, in the order help lists them. A command's module is
 * loaded only when it is needed, so `requeue plan` or `requeue simulate`
 * starts without loading BullMQ, ioredis or pino.
 */
const commands: Record<string, () => Promise<Register>> = {
  plan: async () => (await import('./plan.js')).registerPlan,
  simulate: async () => (await import('./simulate/index.js')).registerSimulate,
  worker: async () => (await import('./worker.js')).registerWorker,
  consume: async () => (await import('./consume.js')).registerConsume,
  enqueue: async () => (await import('./enqueue.js')).registerEnqueue,
  queues: async () => (await import('./queues.js')).registerQueues,
  stats: async () => (await import('./stats.js')).registerStats,
  dlq: async () => (await import('./dlq.js')).registerDlq,
  endpoint: async () => (await import('./endpoint.js')).registerEndpoint,
  'retry-now': async () => (await import('./retry-now.js')).registerRetryNow,
  breaker: async () => (await import('./breaker.js')).registerBreaker,
  limits: async () => (await import('./limits.js')).registerLimits,
  doctor: async () => (await import('./doctor.js')).registerDoctor,
  completion: async () => (await import('./completion.js')).registerCompletion,
};

/** Commands that read the whole command tree, so every command is registered with them. */
const needsEveryCommand = new Set(['completion']);

/**
 * Adds commands to the program: only the one `argv` names, or every one
 * (for help, a name to suggest a correction for, or `completion`).
 */
export async function registerCommands(
  program: Command,
  argv: readonly string[] = [],
): Promise<void> {
  const named = argv.slice(2).find((arg) => !arg.startsWith('-'));
  const names =
    named !== undefined && named in commands && !needsEveryCommand.has(named)
      ? [named]
      : Object.keys(commands);
  for (const name of names) (await commands[name]!())(program);
}
