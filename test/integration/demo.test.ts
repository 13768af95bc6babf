import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { canConnect } from '../../src/redis/redis-server.js';
import { connect, redisUrl } from '../harness/redis.js';

interface DemoSummary {
  deliveries: number;
  delivered: number;
  retries: number;
  deadLettered: Record<string, number>;
  breakerTrips: number;
  deliveryDelayMs: { p50: number; p99: number };
  receiver: { requests: number; duplicates: number; badSignatures: number };
}

describe('npm run demo', () => {
  it(
    'delivers through 503s, 429s, an outage and a 410, and ends with its summary',
    { timeout: 120_000 },
    async () => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'workers/service/demo.ts'], {
        env: { ...process.env, REDIS_URL: redisUrl(), DEMO_JOBS: '300', LOG_LEVEL: 'silent' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code).toBe(0);
      expect(stdout).toContain('summary');
      const summary = JSON.parse(stdout.trim().split('\n').at(-1)!) as DemoSummary;
      const dead = Object.values(summary.deadLettered).reduce((a, b) => a + b, 0);
      expect(summary.delivered + dead).toBe(300);
      // One endpoint in nine answers 410: its jobs die (gone, then endpoint-disabled); every other job is delivered.
      // Job i goes to endpoint i % 9, and the ninth endpoint ("legacy") answers 410.
      const toGone = Array.from({ length: 300 }, (_, i) => i).filter((i) => i % 9 === 8).length;
      expect(summary.delivered).toBe(300 - toGone);
      expect(Object.keys(summary.deadLettered).sort()).toEqual(expect.arrayContaining(['gone']));
      expect(summary.retries).toBeGreaterThan(0);
      expect(summary.breakerTrips).toBeGreaterThan(0);
      expect(summary.receiver).toMatchObject({ duplicates: 0, badSignatures: 0 });
      expect(summary.deliveryDelayMs.p99).toBeGreaterThanOrEqual(summary.deliveryDelayMs.p50);
      // Each number printed says what it counts.
      for (const label of ['delivered', 'retries', 'deferrals', 'dead-lettered', 'breaker trips']) {
        expect(stdout).toMatch(new RegExp(`^  ${label} +\\d+[^:\\n]*: \\S`, 'm'));
      }
    },
  );

  it(
    "runs on a private redis-server and leaves nothing in the user's Redis",
    { timeout: 120_000 },
    async () => {
      const redis = connect();
      const before = await redis.keys('*demo-webhooks-*');
      const child = spawn(process.execPath, ['--import', 'tsx', 'workers/service/demo.ts'], {
        env: { ...process.env, REDIS_URL: redisUrl(), DEMO_JOBS: '30', LOG_LEVEL: 'silent' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.stdout.resume();
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code).toBe(0);
      const port = /a private redis-server on 127\.0\.0\.1:(\d+)/.exec(stderr)?.[1];
      expect(port).toBeDefined();
      expect(await redis.keys('*demo-webhooks-*')).toEqual(before);
      // Its private server is gone with it.
      expect(await canConnect('127.0.0.1', Number(port))).toBe(false);
      redis.disconnect();
    },
  );
});
