/**
 * `bench:webhooks`' fan-out and delivery-log figures (issue 24): one message
 * sent to N registered endpoints (all subscribed), delivered by one webhook
 * worker in this process with its defaults to a loopback receiver — how
 * long `sendMessage` takes, and how long until the first and the last
 * endpoint has it — run twice on a flushed private Redis, with the delivery
 * log off and on: the difference per delivery, in server commands
 * (`INFO commandstats`, scripts' inner commands included) and in bytes
 * (`MEMORY USAGE` of every `dlog` key), is what the log costs.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { createQueue } from 'requeue';
import {
  createEndpoint,
  createWebhookWorker,
  EndpointRegistry,
  sendMessage,
} from 'requeue/webhook';
import { diffTally, serverCommandStats, totalCalls } from './support/command-counter.js';

/** One run of the fan-out. */
export interface FanoutRun {
  deliveryLog: boolean;
  endpoints: number;
  /** `sendMessage` from call to return: the N deliveries stored. */
  sendMs: number;
  firstDeliveryMs: number;
  lastDeliveryMs: number;
  /** Server commands per delivery, from the send to the last log write. */
  commandsPerDelivery: number;
  /** Bytes of the delivery log per delivery (0 with it off). */
  logBytesPerDelivery: number;
}

/** Both runs and what the log costs per delivery. */
export interface FanoutReport {
  off: FanoutRun;
  on: FanoutRun;
  logCommandsPerDelivery: number;
  logBytesPerDelivery: number;
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('fan-out: timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function logBytes(admin: Redis, queue: string): Promise<number> {
  let bytes = 0;
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(
      cursor,
      'MATCH',
      `requeue:{${queue}}:dlog*`,
      'COUNT',
      1000,
    );
    cursor = next;
    for (const key of keys) bytes += Number((await admin.memory('USAGE', key, 'SAMPLES', 0)) ?? 0);
  } while (cursor !== '0');
  return bytes;
}

async function runOnce(
  redisUrl: string,
  admin: Redis,
  endpoints: number,
  deliveryLog: boolean,
): Promise<FanoutRun> {
  await admin.flushall();
  const arrived = new Map<string, number>();
  const server = createServer((req, res) => {
    req.resume();
    if (!arrived.has(req.url ?? '')) arrived.set(req.url ?? '', performance.now());
    res.writeHead(200).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const name = 'webhooks';
  const registry = new EndpointRegistry({ connection: redisUrl });
  for (let i = 0; i < endpoints; i += 50)
    await Promise.all(
      Array.from({ length: Math.min(50, endpoints - i) }, (_, k) =>
        createEndpoint(
          registry,
          name,
          `ep-${i + k}`,
          { url: `${base}/ep-${i + k}` },
          {
            allowPrivate: true,
          },
        ),
      ),
    );
  const queue = createQueue(name, { connection: redisUrl });
  const worker = createWebhookWorker(name, {
    connection: redisUrl,
    allowPrivate: true,
    registry,
    logger: { level: 'silent' },
    ...(deliveryLog ? {} : { deliveryLog: false as const }),
  });
  await worker.waitUntilReady();
  const before = await serverCommandStats(admin);
  const t0 = performance.now();
  await sendMessage(
    queue,
    { type: 'bench.fanout', payload: { n: 1 }, id: 'msg_fanout' },
    { registry },
  );
  const sendMs = performance.now() - t0;
  await until(() => arrived.size >= endpoints, 300_000);
  const times = [...arrived.values()];
  if (deliveryLog)
    await until(async () => (await admin.zcard(`requeue:{${name}}:dlog`)) >= endpoints, 60_000);
  const after = await serverCommandStats(admin);
  const bytes = deliveryLog ? await logBytes(admin, name) : 0;
  await worker.close({ timeoutMs: 10_000 });
  await queue.close();
  await registry.close();
  await new Promise((resolve) => server.close(resolve));
  return {
    deliveryLog,
    endpoints,
    sendMs,
    firstDeliveryMs: Math.min(...times) - t0,
    lastDeliveryMs: Math.max(...times) - t0,
    // commandstats counts itself (INFO) once per read: one per run, negligible.
    commandsPerDelivery: totalCalls(diffTally(before, after)) / endpoints,
    logBytesPerDelivery: bytes / endpoints,
  };
}

/** The fan-out of one message to `endpoints` endpoints, the delivery log off and then on. */
export async function runFanout(
  redisUrl: string,
  admin: Redis,
  endpoints: number,
): Promise<FanoutReport> {
  const off = await runOnce(redisUrl, admin, endpoints, false);
  const on = await runOnce(redisUrl, admin, endpoints, true);
  return {
    off,
    on,
    logCommandsPerDelivery: on.commandsPerDelivery - off.commandsPerDelivery,
    logBytesPerDelivery: on.logBytesPerDelivery,
  };
}

/** The report as a Markdown section body. */
export function renderFanout(report: FanoutReport, context: string): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const row = (r: FanoutRun) =>
    `| ${r.deliveryLog ? 'on' : 'off'} | ${r.endpoints.toLocaleString('en-US')} | ${s(r.sendMs)} | ${s(r.firstDeliveryMs)} | **${s(r.lastDeliveryMs)}** | ${r.commandsPerDelivery.toFixed(1)} | ${Math.round(r.logBytesPerDelivery)} |`;
  return [
    `### Fan-out of one message, and the delivery log's cost (issue 24)`,
    '',
    context,
    '',
    '| delivery log | endpoints | `sendMessage` | first delivery | last delivery | server commands per delivery | log bytes per delivery |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    row(report.off),
    row(report.on),
    '',
    `The delivery log costs **${report.logCommandsPerDelivery.toFixed(1)} server commands** and **${Math.round(report.logBytesPerDelivery)} bytes** per delivery, measured (an entry without a response excerpt; its write is 9 server commands, MULTI, 7 commands and EXEC, after the move; the rest of the measured difference is whatever else the two runs did differently). Server commands count everything Redis ran between the send and the last log write, Lua scripts' inner commands included.`,
  ].join('\n');
}
