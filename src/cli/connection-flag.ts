import type { Command } from 'commander';
import { readEnv } from '../config/env.js';
import { defaultRedisUrl } from '../redis/connection.js';

/** Adds `--redis <url>` to a command. */
export function withRedisOption(command: Command): Command {
  return command.option(
    '--redis <url>',
    'Redis URL (default: REDIS_URL, else redis://127.0.0.1:6379)',
  );
}

/** The Redis URL for a command: `--redis`, else `REDIS_URL`, else the local default. */
export function redisUrlFrom(options: { redis?: string }): string {
  return options.redis ?? readEnv().REDIS_URL ?? defaultRedisUrl;
}
