import type { Command } from 'commander';
import { registerBreaker } from './breaker.js';
import { registerDlq } from './dlq.js';
import { registerEndpoint } from './endpoint.js';
import { registerEnqueue } from './enqueue.js';
import { registerPlan } from './plan.js';
import { registerStats } from './stats.js';
import { registerWorker } from './worker.js';

/** Adds every command to the program. One line per command file. */
export function registerCommands(program: Command): void {
  registerPlan(program);
  registerWorker(program);
  registerEnqueue(program);
  registerStats(program);
  registerDlq(program);
  registerEndpoint(program);
  registerBreaker(program);
}
