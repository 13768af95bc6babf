/**
 * The SSRF guard of webhook delivery: a webhook URL is chosen by whoever
 * registers the endpoint, so by default a delivery must not reach the
 * worker's own network (loopback, private ranges, link-local, the cloud
 * metadata service). Addresses are checked when the socket connects — in
 * the `lookup` handed to `http.request` — so a name that resolves to a
 * public address at validation time and to 127.0.0.1 at connect time (DNS
 * rebinding) is still refused.
 *
 * @see https://www.standardwebhooks.com/ ("Server side request forgery")
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { ConfigError } from '../../src/config/env.js';
import { PermanentError } from '../../src/errors/permanent-error.js';

/** Why an address is not a public destination. */
export type BlockedRange =
  | 'metadata'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'shared'
  | 'multicast'
  | 'reserved';

/** Options of {@link createSsrfGuard}. */
export interface SsrfOptions {
  /**
   * Let deliveries reach every blocked range except the metadata addresses
   * (development, tests, an internal deployment). @defaultValue `false`
   */
  allowPrivate?: boolean;
  /**
   * Destinations let through whatever they resolve to: host names
   * (`localhost`, `*.internal.example` for subdomains), IP addresses or
   * CIDRs (`10.1.0.0/16`, `fd00::/8`). Unlike `allowPrivate`, an entry that
   * covers a metadata address opens it.
   * @defaultValue `[]`
   */
  allowHosts?: readonly string[];
}

/** An address as a number, IPv4-mapped IPv6 folded to IPv4. */
interface Ip {
  v: 4 | 6;
  n: bigint;
}

interface Cidr extends Ip {
  bits: number;
}

function parseIPv4(text: string): bigint | undefined {
  if (isIP(text) !== 4) return undefined;
  return text.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function parseIPv6(text: string): bigint | undefined {
  // A zone (`fe80::1%eth0`) names an interface, not part of the address.
  const address = text.split('%')[0] ?? '';
  if (isIP(address) !== 6) return undefined;
  let groups = address;
  const lastColon = groups.lastIndexOf(':');
  const tail = groups.slice(lastColon + 1);
  if (tail.includes('.')) {
    const v4 = parseIPv4(tail);
    if (v4 === undefined) return undefined;
    const [high, low] = [(v4 >> 16n).toString(16), (v4 & 0xffffn).toString(16)];
    groups = `${groups.slice(0, lastColon + 1)}${high}:${low}`;
  }
  const [head = '', rest] = groups.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const fill = rest === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...fill, ...right].reduce(
    (acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)),
    0n,
  );
}

/** Parses an IP literal (brackets allowed), folding `::ffff:a.b.c.d` to IPv4. */
function parseIp(text: string): Ip | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const v4 = parseIPv4(bare);
  if (v4 !== undefined) return { v: 4, n: v4 };
  const v6 = parseIPv6(bare);
  if (v6 === undefined) return undefined;
  if (v6 >> 32n === 0xffffn) return { v: 4, n: v6 & 0xffffffffn };
  return { v: 6, n: v6 };
}

function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!ip) return undefined;
  const width = ip.v === 4 ? 32 : 128;
  if (slash < 0) return { ...ip, bits: width };
  const prefix = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefix)) return undefined;
  let bits = Number(prefix);
  // `::ffff:10.0.0.0/104` was folded to IPv4: move the prefix with it.
  const folded = ip.v === 4 && isIP(text.slice(0, slash)) === 6;
  if (folded) bits -= 96;
  if (bits < 0 || bits > width) return undefined;
  return { ...ip, bits };
}

function contains(cidr: Cidr, ip: Ip): boolean {
  if (cidr.v !== ip.v) return false;
  const shift = BigInt((ip.v === 4 ? 32 : 128) - cidr.bits);
  return ip.n >> shift === cidr.n >> shift;
}

function table(entries: [BlockedRange, string[]][]): [BlockedRange, Cidr][] {
  return entries.flatMap(([range, cidrs]) =>
    cidrs.map((c): [BlockedRange, Cidr] => [range, parseCidr(c)!]),
  );
}

/**
 * The blocked ranges, most specific first: the metadata addresses sit inside
 * link-local and must be named as what they are.
 * @see RFC 6890 (special-purpose registries), RFC 6598 (shared 100.64/10), RFC 4193 (fc00::/7)
 */
const BLOCKED = table([
  [
    'metadata',
    [
      '169.254.169.254', // AWS, GCP, Azure, OpenStack instance metadata
      '169.254.170.2', // AWS ECS task metadata
      'fd00:ec2::254', // AWS IMDS over IPv6
      '100.100.100.200', // Alibaba Cloud
      '192.0.0.192', // Oracle Cloud
      '168.63.129.16', // Azure WireServer: a public address only reachable from inside Azure
    ],
  ],
  ['unspecified', ['0.0.0.0/8', '::/128']],
  ['loopback', ['127.0.0.0/8', '::1/128']],
  [
    'private',
    ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7', 'fec0::/10', '64:ff9b:1::/48'],
  ],
  ['link-local', ['169.254.0.0/16', 'fe80::/10']],
  ['shared', ['100.64.0.0/10']],
  ['multicast', ['224.0.0.0/4', 'ff00::/8']],
  [
    'reserved',
    [
      '240.0.0.0/4', // future use, and 255.255.255.255
      '192.0.0.0/24', // IETF protocol assignments
      '192.0.2.0/24', // documentation
      '198.18.0.0/15', // benchmarking
      '198.51.100.0/24',
      '203.0.113.0/24',
      '2001:db8::/32',
      '100::/64', // discard-only
    ],
  ],
]);

/** IPv6 ranges that carry an IPv4 address in their low bits, which is what the packet reaches. */
const EMBEDDING: { cidr: Cidr; extract: (n: bigint) => bigint }[] = [
  { cidr: parseCidr('64:ff9b::/96')!, extract: (n) => n & 0xffffffffn }, // NAT64
  { cidr: parseCidr('::/96')!, extract: (n) => n & 0xffffffffn }, // IPv4-compatible (deprecated)
  { cidr: parseCidr('2002::/16')!, extract: (n) => (n >> 80n) & 0xffffffffn }, // 6to4
];

function rangeOfIp(ip: Ip): BlockedRange | undefined {
  for (const [range, cidr] of BLOCKED) if (contains(cidr, ip)) return range;
  if (ip.v === 6) {
    for (const { cidr, extract } of EMBEDDING) {
      if (contains(cidr, ip)) return rangeOfIp({ v: 4, n: extract(ip.n) });
    }
  }
  return undefined;
}

/**
 * The blocked range `address` lies in, or `undefined` for a public address.
 * IPv4-mapped (`::ffff:127.0.0.1`), NAT64, 6to4 and IPv4-compatible IPv6
 * addresses are judged by the IPv4 address they carry.
 * @throws TypeError if `address` is not an IP address.
 */
export function blockedRange(address: string): BlockedRange | undefined {
  const ip = parseIp(address);
  if (!ip) throw new TypeError(`not an IP address: "${address}"`);
  return rangeOfIp(ip);
}

const DESCRIPTIONS: Record<BlockedRange, string> = {
  metadata: 'a cloud metadata address',
  unspecified: 'an unspecified address',
  loopback: 'a loopback address',
  private: 'a private-network address',
  'link-local': 'a link-local address',
  shared: 'a carrier-grade NAT (100.64/10) address',
  multicast: 'a multicast address',
  reserved: 'a reserved address',
};

/** Resolves every address of a name, as `dns.lookup` with `all: true` does. */
export type Resolver = (
  hostname: string,
  options: LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/** Checks destinations against {@link SsrfOptions}. */
export interface SsrfGuard {
  /** Why `address`, reached for `hostname`, is refused; `undefined` when it may be used. */
  refusal(hostname: string, address: string): string | undefined;
  /** Throws the {@link PermanentError} for a refused destination. */
  check(hostname: string, address: string): void;
  /** A `lookup` for `http.request` that resolves and drops refused addresses. */
  readonly lookup: LookupFunction;
}

/** The code of the error a refused destination raises. */
export const destinationRefusedCode = 'ERR_DESTINATION_REFUSED';

function refusedError(message: string): PermanentError & { code: string } {
  return Object.assign(new PermanentError(message), { code: destinationRefusedCode });
}

function normaliseHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}

function parseAllowHosts(entries: readonly string[]): { names: string[]; cidrs: Cidr[] } {
  const names: string[] = [];
  const cidrs: Cidr[] = [];
  entries.forEach((entry, index) => {
    const text = entry.trim();
    const cidr = parseCidr(text);
    if (cidr) cidrs.push(cidr);
    else if (/^(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/i.test(text)) names.push(normaliseHost(text));
    else {
      throw new ConfigError(
        `allowHosts.${index}: "${entry}" is not a host name, an IP address or a CIDR`,
      );
    }
  });
  return { names, cidrs };
}

/**
 * Builds the guard. Refused destinations raise a {@link PermanentError}
 * (code {@link destinationRefusedCode}): retrying cannot make them allowed.
 *
 * The `lookup` resolves every address of the name and keeps the allowed
 * ones, so a name that resolves to both a public and a private address is
 * only ever connected to on the public one; when none is left the
 * connection fails with the refusal.
 *
 * @param resolve - the resolver; `dns.lookup` unless given (tests pass a fixed one).
 * @throws ConfigError naming a malformed `allowHosts` entry.
 */
export function createSsrfGuard(
  options: SsrfOptions = {},
  resolve: Resolver = dnsLookup as Resolver,
): SsrfGuard {
  const allowPrivate = options.allowPrivate ?? false;
  const allowed = parseAllowHosts(options.allowHosts ?? []);

  const hostAllowed = (hostname: string): boolean => {
    const host = normaliseHost(hostname.replace(/^\[|\]$/g, ''));
    return allowed.names.some((name) =>
      name.startsWith('*.') ? host.endsWith(name.slice(1)) : host === name,
    );
  };

  const refusal = (hostname: string, address: string): string | undefined => {
    const ip = parseIp(address);
    if (!ip) return `refused to connect to ${hostname}: "${address}" is not an IP address`;
    if (hostAllowed(hostname) || allowed.cidrs.some((cidr) => contains(cidr, ip))) return undefined;
    const range = rangeOfIp(ip);
    if (range === undefined || (allowPrivate && range !== 'metadata')) return undefined;
    const target = hostname === address ? address : `${hostname} (${address})`;
    const remedy =
      range === 'metadata'
        ? 'allow it explicitly with allowHosts if this is really meant'
        : 'allow it with allowPrivate or allowHosts';
    return `refused to connect to ${target}: ${DESCRIPTIONS[range]}, blocked against SSRF; ${remedy}`;
  };

  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    resolve(hostname, { ...lookupOptions, all: true }, (err, addresses) => {
      if (err) {
        callback(err, []);
        return;
      }
      const usable: LookupAddress[] = [];
      let firstRefusal: string | undefined;
      for (const entry of addresses) {
        const reason = refusal(hostname, entry.address);
        if (reason === undefined) usable.push(entry);
        else firstRefusal ??= reason;
      }
      const first = usable[0];
      if (!first) {
        const error =
          firstRefusal === undefined
            ? Object.assign(new Error(`${hostname} resolved to no address`), { code: 'ENOTFOUND' })
            : refusedError(firstRefusal);
        callback(error, []);
        return;
      }
      if (lookupOptions.all) callback(null, usable);
      else callback(null, first.address, first.family);
    });
  };

  return {
    refusal,
    check(hostname, address) {
      const reason = refusal(hostname, address);
      if (reason !== undefined) throw refusedError(reason);
    },
    lookup,
  };
}
