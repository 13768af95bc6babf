import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

interface Compose {
  services: Record<
    string,
    {
      image?: string;
      build?: unknown;
      command?: string[];
      ports?: string[];
      volumes?: string[];
      healthcheck?: { test: string[] };
      depends_on?: Record<string, { condition: string }>;
      environment?: Record<string, string>;
    }
  >;
  volumes: Record<string, unknown>;
}

describe('docker-compose.yml', async () => {
  const compose = parse(await readFile('docker-compose.yml', 'utf8')) as Compose;
  const readme = await readFile('README.md', 'utf8');

  it('runs Redis with AOF, noeviction, a healthcheck and a volume', () => {
    const redis = compose.services.redis!;
    expect(redis.image).toMatch(/^redis:7/);
    expect(redis.command).toEqual(
      expect.arrayContaining(['--appendonly', 'yes', '--maxmemory-policy', 'noeviction']),
    );
    expect(redis.healthcheck?.test).toEqual(expect.arrayContaining(['redis-cli', 'ping']));
    expect(redis.volumes).toEqual(['redis-data:/data']);
    expect(compose.volumes).toHaveProperty('redis-data');
  });

  it('does not publish its unauthenticated Redis on the host', () => {
    const redis = compose.services.redis!;
    expect(redis.ports).toBeUndefined();
    expect(redis.command?.join(' ')).not.toContain('requirepass');
  });

  it('runs Redis with hz 100, as the embedded Redis does', () => {
    expect(compose.services.redis!.command?.join(' ')).toContain('--hz 100');
  });

  it('runs the requeue service on the port the README promises, after Redis is healthy', () => {
    const service = compose.services.requeue!;
    expect(service.ports).toEqual(['8080:8080']);
    expect(service.depends_on?.redis?.condition).toBe('service_healthy');
    expect(service.environment?.REDIS_URL).toBe('redis://redis:6379');
    expect(readme).toContain('the requeue service on port 8080');
  });

  it('has a scalable worker service without fixed ports', () => {
    const worker = compose.services.worker!;
    expect(worker.image).toBe(compose.services.requeue!.image);
    expect(worker.ports).toBeUndefined();
    expect(worker.command?.join(' ')).toContain('workers/webhook/main.js');
    expect(readme).toContain('docker compose up --scale worker=3');
    expect(readme).toContain('volume `redis-data`');
  });
});
