import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DestinationStream } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { deliverWebhook, WebhookDeliveryError } from '../../workers/webhook/deliver.js';
import { enqueueWebhook, type WebhookJobInput } from '../../workers/webhook/webhook-worker.js';
import { spawnTs, type TsChild } from '../harness/child.js';
import { cli } from '../harness/cli.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * Issue 21, part 3: a receiver that answers 4xx/5xx with the request echoed
 * back must not get what requeue sent as a credential into any view. A real
 * loopback receiver echoes the URL and the credential headers (JSON, so
 * quotes come back escaped); jobs carry URL userinfo (sent as Basic), a
 * token query parameter, `X-Api-Key`, cookies, a partner token, a signing
 * secret, a Bearer and a Basic `Authorization`. Then every view is searched
 * for every secret in every common encoding: the DLQ records in Redis as
 * stored (all but the job's own `data`, which is kept as sent for replay),
 * `requeue dlq list/show` (`--json` and text), the admin API's DLQ and job
 * views, and the logs of the service and of the standalone webhook worker.
 */

const port = () => (receiver.address() as AddressInfo).port;

/** A secret requeue sends: its value and a marker that survives any cut. */
interface Secret {
  name: string;
  value: string;
  /** Other forms it is sent or echoed in (base64 of a Basic pair, the URL-encoded query value). */
  forms?: string[];
}

const secrets: Secret[] = [
  { name: 'userinfo password', value: 'pw-K3ymark-userinfo' },
  {
    name: 'userinfo Basic',
    value: Buffer.from('ada-user:pw-K3ymark-userinfo').toString('base64'),
  },
  { name: 'query token', value: 'qt+K3ymark/query=', forms: ['qt%2BK3ymark%2Fquery%3D'] },
  { name: 'X-Api-Key', value: 'ak"K3ymark\\apikey' },
  { name: 'cookie', value: 'ck-K3ymark-cookie' },
  { name: 'partner token', value: 'pt-K3ymark-partner' },
  { name: 'Bearer', value: 'bt-K3ymark-bearer.token' },
  { name: 'Basic header', value: Buffer.from('carol:bp-K3ymark-basic').toString('base64') },
  { name: 'Basic password', value: 'bp-K3ymark-basic' },
  { name: 'signing secret', value: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
];

/** Every way a secret could show: as is, JSON-escaped, URL-encoded, base64, and its marker cut. */
function needles(secret: Secret): string[] {
  const { value } = secret;
  const out = new Set([
    value,
    JSON.stringify(value).slice(1, -1),
    JSON.stringify(JSON.stringify(value).slice(1, -1)).slice(1, -1),
    encodeURIComponent(value),
    Buffer.from(value).toString('base64'),
    ...(secret.forms ?? []),
  ]);
  // A secret cut at a length limit still leaks its start: the marker's neighbourhood.
  const marker = /[a-z]{2}.K3ymark.[a-z]{3}/i.exec(value)?.[0];
  if (marker) out.add(marker.slice(0, 8));
  return [...out].filter((n) => n.length >= 6);
}

function jobs(base: string, tag: string): WebhookJobInput[] {
  const url = new URL(`http://127.0.0.1:${port()}/hook`);
  const event = (id: string) => ({ id: `${tag}-${id}`, type: 'leak.test', payload: { n: 1 } });
  return [
    {
      endpoint: {
        id: `${tag}-everything`,
        url: `http://ada-user:pw-K3ymark-userinfo@${url.host}/hook?token=${encodeURIComponent('qt+K3ymark/query=')}&a=1`,
        secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      },
      event: event('everything'),
      headers: {
        'X-Api-Key': 'ak"K3ymark\\apikey',
        Cookie: 'session=ck-K3ymark-cookie; theme=dark',
        'X-Partner-Token': 'pt-K3ymark-partner',
      },
    },
    {
      endpoint: { id: `${tag}-bearer`, url: `${base}/hook` },
      event: event('bearer'),
      headers: { Authorization: 'Bearer bt-K3ymark-bearer.token' },
    },
    {
      endpoint: { id: `${tag}-basic`, url: `${base}/hook` },
      event: event('basic'),
      headers: {
        Authorization: `Basic ${Buffer.from('carol:bp-K3ymark-basic').toString('base64')}`,
      },
    },
  ];
}

let receiver: Server;
const seen = new Map<string, number>();
let redis: RedisClient;
let service: RunningService;
let worker: TsChild;
let serviceLog = '';
const served = uniqueQueueName('echo-service');
const standalone = uniqueQueueName('echo-worker');
const queues: RequeueQueue[] = [];
/** view name → its text. */
const views = new Map<string, string>();

const policy = { strategy: 'fixed', baseMs: 20, capMs: 20, maxAttempts: 3 } as const;

async function deadIds(queue: string, want: number): Promise<string[]> {
  const dlq = new DeadLetterQueue(queue, { connection: redis });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const items = await dlq.list({}, { limit: 100 });
    if (items.length >= want) return items.map((r) => r.id);
    if (Date.now() > deadline) throw new Error(`${queue}: ${items.length} of ${want} dead`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The DLQ records as Redis holds them, every field but the job's own `data`. */
async function rawRecords(queue: string, ids: string[]): Promise<string> {
  const parts: string[] = [];
  for (const id of ids) {
    const hash = await redis.hgetall(`${requeueKeys(queue).deadRecordPrefix}${id}`);
    expect(Object.keys(hash).length, `${queue} ${id} record`).toBeGreaterThan(0);
    delete hash.data;
    // Each field as Redis holds it (a JSON string stays escaped exactly once).
    for (const [field, value] of Object.entries(hash)) parts.push(`${field}: ${value}`);
  }
  return parts.join('\n');
}

async function collectCliViews(label: string, queue: string, ids: string[]): Promise<void> {
  views.set(`${label}: dlq list --json`, (await cli('dlq', 'list', queue, '--json')).stdout);
  views.set(`${label}: dlq list`, (await cli('dlq', 'list', queue)).stdout);
  let showJson = '';
  let show = '';
  for (const id of ids) {
    showJson += (await cli('dlq', 'show', queue, id, '--json')).stdout;
    show += (await cli('dlq', 'show', queue, id)).stdout;
  }
  views.set(`${label}: dlq show --json`, showJson);
  views.set(`${label}: dlq show`, show);
}

describe('secrets a receiver echoes back stay secret', () => {
  beforeAll(async () => {
    receiver = createServer((req, res) => {
      if (req.url === '/pad') {
        // The key starts 12 bytes before the 512 bytes a history keeps.
        res.writeHead(400).end(`${'x'.repeat(500)}${req.headers['x-api-key']}`);
        return;
      }
      const id = String(req.headers['webhook-id']);
      const n = (seen.get(id) ?? 0) + 1;
      seen.set(id, n);
      res.writeHead(n === 1 ? 503 : 400, { 'content-type': 'application/json' });
      // Echo what a debugging receiver would: the URL and the credential headers.
      res.end(
        JSON.stringify({
          url: req.url,
          authorization: req.headers.authorization,
          'x-api-key': req.headers['x-api-key'],
          cookie: req.headers.cookie,
          'x-partner-token': req.headers['x-partner-token'],
          signature: req.headers['webhook-signature'],
        }),
      );
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    redis = connect();
    const destination: DestinationStream = { write: (line: string) => void (serviceLog += line) };
    service = await startService(
      parseServiceConfig(
        {
          port: 0,
          redisUrl: redisUrl(),
          logLevel: 'trace',
          webhooks: { queue: served, allowPrivate: true, policy },
        },
        {},
      ),
      createLogger({ level: 'trace', destination }),
    );
    worker = spawnTs('workers/webhook/main.ts', [], {
      REDIS_URL: redisUrl(),
      WEBHOOK_QUEUE: standalone,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      LOG_LEVEL: 'trace',
    });
  });

  afterAll(async () => {
    await worker?.kill('SIGTERM');
    await service?.stop();
    for (const q of queues) await q.close();
    await new Promise((resolve) => receiver?.close(resolve));
    await cleanQueue(redis, served);
    await cleanQueue(redis, standalone);
    redis?.disconnect();
  });

  it('a receiver echoing the request with 5xx then 4xx leaks no credential into any view', async () => {
    const base = `http://127.0.0.1:${port()}`;
    for (const [queue, tag] of [
      [served, 's'],
      [standalone, 'w'],
    ] as const) {
      const q = createQueue(queue, { connection: redis });
      queues.push(q);
      for (const job of jobs(base, tag)) await enqueueWebhook(q, job, { policy });
    }
    const servedIds = await deadIds(served, 3);
    const workerIds = await deadIds(standalone, 3);

    views.set('service: DLQ records in Redis', await rawRecords(served, servedIds));
    views.set('worker: DLQ records in Redis', await rawRecords(standalone, workerIds));
    await collectCliViews('service', served, servedIds);
    await collectCliViews('worker', standalone, workerIds);
    const admin = async (path: string) => (await fetch(`${service.url}/admin${path}`)).text();
    views.set('admin API: DLQ list', await admin(`/queues/${served}/dlq`));
    let shows = '';
    let jobViews = '';
    for (const id of servedIds) {
      shows += await admin(`/queues/${served}/dlq/${encodeURIComponent(id)}`);
      jobViews += await admin(`/queues/${served}/jobs/${encodeURIComponent(id)}`);
    }
    views.set('admin API: DLQ show', shows);
    views.set('admin API: job view', jobViews);
    views.set('service log', serviceLog);
    views.set('webhook worker log', worker.stdout() + worker.stderr());

    // Every view holds what it should (the attempts' status), so a missing view cannot pass.
    for (const [view, text] of views) expect(text, view).toMatch(/400|Bad Request/);
    // The echo did reach what is stored, and was blanked there.
    for (const view of ['service: DLQ records in Redis', 'worker: DLQ records in Redis'])
      expect(views.get(view), view).toContain('[redacted]');

    const leaks: Record<string, string[]> = {};
    for (const secret of secrets) {
      const found = [...views]
        .filter(([, text]) => needles(secret).some((n) => text.includes(n)))
        .map(([view]) => view);
      leaks[secret.name] = found;
    }
    const counts = Object.fromEntries(Object.entries(leaks).map(([k, v]) => [k, v.length]));
    console.log(
      `views searched: ${views.size}; views leaking, per secret: ${JSON.stringify(counts)}`,
    );
    expect(leaks).toEqual(Object.fromEntries(secrets.map((s) => [s.name, []])));
  });

  it('a secret straddling the kept body limit is not kept half', async () => {
    const key = 'cut-K3ymark-0123456789abcdef';
    const failure = await deliverWebhook(
      {
        endpoint: { id: 'pad', url: `http://127.0.0.1:${port()}/pad` },
        event: { id: 'evt-pad', type: 'leak.test', payload: null },
        headers: { 'x-api-key': key },
      },
      { allowPrivate: true, maxBodyBytes: 512 },
    ).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(WebhookDeliveryError);
    const body = (failure as WebhookDeliveryError).body ?? '';
    expect(body.startsWith('x'.repeat(500))).toBe(true);
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(512);
    expect(body).not.toContain('cut-K3y');
  });
});
