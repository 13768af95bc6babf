/**
 * The SSRF guard of webhook delivery: a webhook URL is chosen by whoever
 * registers the endpoint, so by default a delivery must not reach the
 * worker's own network (loopback, private ranges, link-local, the cloud
 * metadata service). Addresses are checked when the socket connects — in
 * the `lookup` handed to `http.request` — so a name that resolves to a
 * public address at validation time and to 127.0.0.1 at connect time (DNS
 * rebinding) is still refused. Addresses are parsed and classified by
 * ipaddr.js (its special ranges), with the cloud metadata addresses and the
 * IPv6 forms that carry an IPv4 address added here.
 *
 * @see https://www.standardwebhooks.com/ ("Server side request forgery")
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
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

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** A range: an address and a prefix length, as ipaddr.js's `match` takes it. */
type Cidr = [Address, number];

function isIPv6(address: Address): address is ipaddr.IPv6 {
  return address.kind() === 'ipv6';
}

/**
 * Parses an IP literal (brackets and an IPv6 zone allowed), folding
 * `::ffff:a.b.c.d` to IPv4. `net.isIP` decides first what is an address:
 * ipaddr.js alone would also read `127.1`, `0x7f.0.0.1` and octal parts.
 */
function parseIp(text: string): Address | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  // A zone (`fe80::1%eth0`) names an interface, not part of the address.
  if (isIP(bare.split('%')[0] ?? '') === 0) return undefined;
  const address = ipaddr.parse(bare);
  return isIPv6(address) && address.isIPv4MappedAddress() ? address.toIPv4Address() : address;
}

function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const literal = slash < 0 ? text : text.slice(0, slash);
  const address = parseIp(literal);
  if (!address) return undefined;
  const width = address.kind() === 'ipv4' ? 32 : 128;
  if (slash < 0) return [address, width];
  const prefix = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefix)) return undefined;
  // `::ffff:10.0.0.0/104` was folded to IPv4: move the prefix with it.
  const bits = Number(prefix) - (address.kind() === 'ipv4' && isIP(literal) === 6 ? 96 : 0);
  return bits < 0 || bits > width ? undefined : [address, bits];
}

function contains([range, bits]: Cidr, address: Address): boolean {
  return range.kind() === address.kind() && address.match(range, bits);
}

function cidrs(texts: readonly string[]): Cidr[] {
  return texts.map((text) => parseCidr(text)!);
}

/**
 * Cloud metadata services, named before the ranges they sit in
 * (link-local, private, public) so a refusal says what they are.
 */
const METADATA = cidrs([
  '169.254.169.254', // AWS, GCP, Azure, OpenStack instance metadata
  '169.254.170.2', // AWS ECS task metadata
  'fd00:ec2::254', // AWS IMDS over IPv6
  '100.100.100.200', // Alibaba Cloud
  '192.0.0.192', // Oracle Cloud
  '168.63.129.16', // Azure WireServer: a public address only reachable from inside Azure
]);

/**
 * ipaddr.js's special ranges (its `range()`), as requeue blocks them; a
 * name not listed (`unicast`, `teredo`, `as112`, `amt`, …) is public.
 * @see RFC 6890 (special-purpose registries), RFC 6598 (shared 100.64/10), RFC 4193 (fc00::/7)
 */
const RANGES: Readonly<Record<string, BlockedRange>> = {
  unspecified: 'unspecified',
  loopback: 'loopback',
  private: 'private', // 10/8, 172.16/12, 192.168/16
  uniqueLocal: 'private', // fc00::/7
  deprecatedSiteLocal: 'private', // fec0::/10
  linkLocal: 'link-local',
  carrierGradeNat: 'shared',
  multicast: 'multicast',
  broadcast: 'reserved',
  reserved: 'reserved', // IETF, documentation, benchmarking 198.18/15, 240/4; 2001:db8::/32
  benchmarking: 'reserved', // 2001:2::/48
  discard: 'reserved', // 100::/64
};

/** NAT64 for local use (RFC 8215): inside ipaddr.js's `rfc6052`, but a private network. */
const LOCAL_NAT64 = cidrs(['64:ff9b:1::/48']);

/** IPv4-compatible IPv6 (`::a.b.c.d`, deprecated), which ipaddr.js calls unicast. */
const IPV4_COMPATIBLE = cidrs(['::/96']);

/**
 * The IPv4 address an IPv6 address carries, which is what the packet
 * reaches: NAT64 (`64:ff9b::/96`), SIIT (`::ffff:0:0:0/96`), 6to4
 * (`2002::/16`) and IPv4-compatible addresses.
 */
function embeddedIPv4(address: ipaddr.IPv6, range: string): ipaddr.IPv4 | undefined {
  const bytes = address.toByteArray();
  if (range === '6to4') return new ipaddr.IPv4(bytes.slice(2, 6));
  const carries =
    range === 'rfc6145' ||
    (range === 'rfc6052' && !LOCAL_NAT64.some((cidr) => contains(cidr, address))) ||
    (range === 'unicast' && IPV4_COMPATIBLE.some((cidr) => contains(cidr, address)));
  return carries ? new ipaddr.IPv4(bytes.slice(12, 16)) : undefined;
}

function rangeOfIp(address: Address): BlockedRange | undefined {
  if (METADATA.some((cidr) => contains(cidr, address))) return 'metadata';
  const range = address.range();
  const blocked = RANGES[range];
  if (blocked !== undefined || !isIPv6(address)) return blocked;
  if (range === 'rfc6052' && LOCAL_NAT64.some((cidr) => contains(cidr, address))) return 'private';
  const carried = embeddedIPv4(address, range);
  return carried === undefined ? undefined : rangeOfIp(carried);
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
