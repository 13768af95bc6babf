import { handler } from './bad-input-config-cases.js';

/**
 * The bad-input table's rows for CLI flags: those refused before any
 * connection, and those that need the run's Redis or a mute one
 * (`bad-input-cli.test.ts` runs them).
 */

// ------------------------------------------------------------------- CLI flags
export const cliCases: [string, string[], RegExp][] = [
  ['plan --max-attempts 1000000', ['plan', '--max-attempts', '1000000'], /--max-attempts.*1000/],
  ['plan --max-attempts 0', ['plan', '--max-attempts', '0'], /--max-attempts/],
  ['plan --base-ms abc', ['plan', '--base-ms', 'abc'], /--base-ms: expected a number/],
  ['plan --cap-ms -5', ['plan', '--cap-ms', '-5'], /--cap-ms/],
  ['plan --cap-ms 1e13', ['plan', '--cap-ms', '1e13'], /--cap-ms/],
  ['plan --factor 1000', ['plan', '--factor', '1000'], /--factor/],
  ['plan --strategy nope', ['plan', '--strategy', 'nope'], /--strategy/],
  ['plan --samples 0', ['plan', '--samples', '0'], /--samples: must be ≥ 1/],
  ['plan --samples 1e9', ['plan', '--samples', '1000000000'], /--samples: must be ≤/],
  ['plan --samples 2.5', ['plan', '--samples', '2.5'], /--samples: expected an integer/],
  [
    'plan --samples × retries too many',
    ['plan', '--samples', '10000000', '--max-attempts', '100'],
    /--samples × retries/,
  ],
  ['plan --seed x', ['plan', '--seed', 'x'], /--seed: expected a number/],
  ['an unknown command', ['frobnicate'], /unknown command/],
  ['stats a:b', ['stats', 'a:b'], /<queue>: "a:b" must not contain ":"/],
  ['stats x.dlq', ['stats', 'x.dlq'], /<queue>: "x.dlq" must not end in "\.dlq"/],
  ['dlq list with a space', ['dlq', 'list', 'a b'], /<queue>: /],
  ['dlq list --limit 0', ['dlq', 'list', 'q', '--limit', '0'], /--limit: must be ≥ 1/],
  ['dlq list --limit 1e6', ['dlq', 'list', 'q', '--limit', '1000000'], /--limit: must be ≤ 10000/],
  ['dlq list --reason nope', ['dlq', 'list', 'q', '--reason', 'nope'], /--reason: expected one of/],
  ['dlq list --since never', ['dlq', 'list', 'q', '--since', 'never'], /--since: /],
  ['dlq replay with no filter', ['dlq', 'replay', 'q'], /give --id/],
  ['dlq replay --rate 0', ['dlq', 'replay', 'q', '--all', '--rate', '0'], /--rate: must be ≥/],
  ['dlq trim --max-count 0', ['dlq', 'trim', 'q', '--max-count', '0'], /--max-count: /],
  ['dlq trim --max-age-days 1e6', ['dlq', 'trim', 'q', '--max-age-days', '1000000'], /≤ 3650/],
  ['enqueue --data not JSON', ['enqueue', 'q', '--data', '{nope'], /--data: not valid JSON/],
  [
    'enqueue --delay-ms a year',
    ['enqueue', 'q', '--data', '{}', '--delay-ms', '31536000000'],
    /--delay-ms: must be ≤/,
  ],
  [
    'worker --concurrency 5000',
    ['worker', 'q', '--handler', handler, '--concurrency', '5000'],
    /--concurrency: must be ≤ 1000/,
  ],
  [
    'worker --policy not JSON',
    ['worker', 'q', '--handler', handler, '--policy', '{'],
    /--policy: not valid JSON/,
  ],
  [
    'worker --breaker out of range',
    ['worker', 'q', '--handler', handler, '--breaker', '{"failureRate":2}'],
    /--breaker\.failureRate: /,
  ],
  [
    'worker --budget unknown kind',
    ['worker', 'q', '--handler', handler, '--budget', '{"kind":"x"}'],
    /--budget\.kind: /,
  ],
  [
    'worker --lock-duration-ms 10',
    ['worker', 'q', '--handler', handler, '--lock-duration-ms', '10'],
    /--lock-duration-ms: must be ≥ 100/,
  ],
  [
    'worker --handler that does not exist',
    ['worker', 'q', '--handler', 'no/such.mjs'],
    /--handler: cannot load no\/such\.mjs/,
  ],
  [
    'worker --handler that exports no function',
    ['worker', 'q', '--handler', 'test/fixtures/not-a-handler.mjs'],
    /--handler: .* has no default export function/,
  ],
  // Issue 21, parts 4, 10 and 11: what each said before is in the label.
  [
    '--redis not-a-url (said "Invalid URL", exit 1)',
    ['stats', 'q', '--redis', 'not-a-url'],
    /^requeue: --redis: expected a redis:\/\/ or rediss:\/\/ URL .*got "not-a-url"$/,
  ],
  ['--redis http://…', ['dlq', 'list', 'q', '--redis', 'http://127.0.0.1:6379'], /--redis: /],
  ['--connect-timeout-ms 0', ['stats', 'q', '--connect-timeout-ms', '0'], /--connect-timeout-ms: /],
  ['--connect-timeout-ms x', ['doctor', '--connect-timeout-ms', 'x'], /--connect-timeout-ms: /],
  [
    '--connect-timeout-ms over an hour',
    ['stats', 'q', '--connect-timeout-ms', '7200000'],
    /--connect-timeout-ms: must be ≤ 3600000/,
  ],
  [
    'enqueue --data nested 10,000 deep (said "Maximum call stack size exceeded")',
    ['enqueue', 'q', '--data', '['.repeat(10_000) + ']'.repeat(10_000)],
    /^requeue: --data: nested deeper than 64 levels$/,
  ],
  [
    'worker --policy nested 10,000 deep',
    [
      'worker',
      'q',
      '--handler',
      handler,
      '--policy',
      '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000),
    ],
    /^requeue: --policy: nested deeper than 64 levels$/,
  ],
  [
    'dlq purge --id \'\' (said "purged 0")',
    ['dlq', 'purge', 'q', '--id', ''],
    /^requeue: --id: must not be empty$/,
  ],
  [
    "dlq replay --id ' '",
    ['dlq', 'replay', 'q', '--id', ' '],
    /^requeue: --id: must not be empty$/,
  ],
  [
    "dlq list --name ''",
    ['dlq', 'list', 'q', '--name', ''],
    /^requeue: --name: must not be empty$/,
  ],
  ["dlq show <id> ''", ['dlq', 'show', 'q', ''], /^requeue: <id>: must not be empty$/],
  [
    "endpoint enable <endpointId> ''",
    ['endpoint', 'enable', 'q', ''],
    /<endpointId>: must not be empty/,
  ],
  [
    'simulate contention --clients 10000 --trials 100000 (ran for hours)',
    ['simulate', '--scenario', 'contention', '--clients', '10000', '--trials', '100000'],
    /^requeue: --clients \(10000\)² × --trials \(100000\) × --strategies \(9\) is up to 9\.0e\+13 simulated calls/,
  ],
  [
    'simulate outage --clients 200000 --duration-ms 3600000 --mean-gap-ms 1 (ran for hours)',
    [
      'simulate',
      '--scenario',
      'outage',
      '--clients',
      '200000',
      '--duration-ms',
      '3600000',
      '--mean-gap-ms',
      '1',
    ],
    /^requeue: --clients \(200000\) × --duration-ms \(3600000\) ÷ min\(--timeout-ms, --mean-gap-ms \+ --min-delay-ms\) × --strategies \(9\)/,
  ],
  [
    'simulate outage --min-delay-ms 0.001 --timeout-ms 0.001 (tiny steps, the same product)',
    ['simulate', '--scenario', 'outage', '--min-delay-ms', '0.001', '--mean-gap-ms', '0.001'],
    /simulated requests, more than 1e\+7/,
  ],
  [
    'plan --samples 10000000 --max-attempts 6 (22 s of CPU, 376 MB)',
    ['plan', '--samples', '10000000', '--max-attempts', '6'],
    /^requeue: --samples × retries: at most 20000000 delays, got 10000000 × 5/,
  ],
  [
    'doctor --queue × 1001',
    ['doctor', ...Array.from({ length: 1001 }, (_, i) => ['--queue', `q${i}`]).flat()],
    /^requeue: --queue: at most 1000, got 1001$/,
  ],
];

/** The URL of a server that accepts connections and never answers (issue 21, part 4). */
let muteUrl = '';
/** Sets the mute server's URL, once it listens (the rows read it when they run). */
export function setMuteUrl(url: string): void {
  muteUrl = url;
}
/** Rows that need the run's Redis or the mute one: label, args, exit code, the one line. */
export const redisCliCases: [string, (queue: string) => string[], number, RegExp][] = [
  [
    'dlq replay --id nope (said "replayed 0", exit 0)',
    (q) => ['dlq', 'replay', q, '--id', 'nope'],
    2,
    /^requeue: --id: no dead job "nope" in .*'s DLQ$/,
  ],
  [
    'dlq purge --id nope',
    (q) => ['dlq', 'purge', q, '--id', 'nope', '--reason', 'gone'],
    2,
    /^requeue: --id: no dead job "nope" in .*'s DLQ matching --reason gone$/,
  ],
  [
    'dlq replay --reason gone with nothing dead: says none matched, exit 0',
    (q) => ['dlq', 'replay', q, '--reason', 'gone'],
    0,
    /^replayed 0 dead jobs: none matching --reason gone$/,
  ],
  [
    'stats of an unknown queue (said zeros, exit 0)',
    (q) => ['stats', `${q}-typo`],
    2,
    /^requeue: <queue>: no queue "bad-input-.*-typo" on this Redis \(known: .*\)$/,
  ],
  [
    'breaker status of an unknown queue (said closed)',
    (q) => ['breaker', 'status', `${q}-typo`],
    2,
    /^requeue: <queue>: no queue "bad-input-.*-typo" on this Redis \(known: .*\)$/,
  ],
  [
    'breaker status --key never seen (said closed)',
    (q) => ['breaker', 'status', q, '--key', 'nope'],
    2,
    /^requeue: --key: no breaker "nope" on .*: never seen \(known: none\)$/,
  ],
  ...(
    [
      ['stats', 'q'],
      ['enqueue', 'q', '--data', '{}'],
      ['dlq', 'list', 'q'],
      ['dlq', 'replay', 'q', '--all'],
      ['breaker', 'status', 'q'],
      ['endpoint', 'list', 'q'],
      ['doctor'],
    ] as const
  ).map((args): [string, (queue: string) => string[], number, RegExp] => [
    `${args.join(' ')} against a mute Redis (hung 60 s or more)`,
    () => [...args, '--redis', muteUrl, '--connect-timeout-ms', '200'],
    2,
    /^requeue: --redis: no reply from Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+ within 200 ms/,
  ]),
];
