import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import { isPermanentError } from '../../src/errors/permanent-error.js';
import {
  blockedRange,
  createSsrfGuard,
  destinationRefusedCode,
  type BlockedRange,
  type Resolver,
  type SsrfGuard,
} from '../../workers/webhook/ssrf.js';

const table: [address: string, range: BlockedRange | undefined][] = [
  // public
  ['8.8.8.8', undefined],
  ['1.1.1.1', undefined],
  ['93.184.216.34', undefined],
  ['172.32.0.1', undefined], // just past 172.16/12
  ['100.128.0.1', undefined], // just past 100.64/10
  ['169.255.0.1', undefined],
  ['2606:4700:4700::1111', undefined],
  ['2001:4860:4860::8888', undefined],
  ['::ffff:8.8.8.8', undefined],
  ['64:ff9b::808:808', undefined], // NAT64 of 8.8.8.8
  // loopback
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['::1', 'loopback'],
  ['0:0:0:0:0:0:0:1', 'loopback'],
  ['[::1]', 'loopback'],
  // IPv4-mapped and other embeddings are judged by the IPv4 address they carry
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['0:0:0:0:0:ffff:7f00:0001', 'loopback'],
  ['::ffff:10.1.2.3', 'private'],
  ['::ffff:169.254.169.254', 'metadata'],
  ['64:ff9b::7f00:1', 'loopback'], // NAT64
  ['2002:7f00:1::1', 'loopback'], // 6to4
  ['::127.0.0.1', 'loopback'], // IPv4-compatible
  // unspecified
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['::', 'unspecified'],
  // private
  ['10.0.0.1', 'private'],
  ['10.255.255.255', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.1', 'private'],
  ['fc00::1', 'private'],
  ['fd12:3456:789a::1', 'private'],
  ['fec0::1', 'private'],
  // link-local
  ['169.254.0.1', 'link-local'],
  ['169.254.169.253', 'link-local'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['febf::1', 'link-local'],
  // CGNAT
  ['100.64.0.1', 'shared'],
  ['100.127.255.255', 'shared'],
  // multicast
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['ff02::1', 'multicast'],
  // reserved
  ['255.255.255.255', 'reserved'],
  ['240.0.0.1', 'reserved'],
  ['192.0.2.1', 'reserved'],
  ['198.18.0.1', 'reserved'],
  ['2001:db8::1', 'reserved'],
  // metadata
  ['169.254.169.254', 'metadata'],
  ['169.254.170.2', 'metadata'],
  ['fd00:ec2::254', 'metadata'],
  ['100.100.100.200', 'metadata'],
  ['168.63.129.16', 'metadata'],
  ['192.0.0.192', 'metadata'],
];

describe('blockedRange', () => {
  it.each(table)('%s → %s', (address, range) => {
    expect(blockedRange(address)).toBe(range);
  });

  it('throws on something that is not an IP address', () => {
    expect(() => blockedRange('example.com')).toThrow(TypeError);
    expect(() => blockedRange('127.1')).toThrow(TypeError);
    expect(() => blockedRange('1.2.3.256')).toThrow(TypeError);
  });
});

describe('blockedRange through ipaddr.js', () => {
  it.each([
    ['::7f00:1', 'loopback'], // IPv4-compatible, written in hex
    ['::ffff:0:7f00:1', 'loopback'], // SIIT (RFC 6145)
    ['64:ff9b:1::1', 'private'], // local-use NAT64 (RFC 8215)
    ['2001:2::1', 'reserved'], // benchmarking
    ['2001::1', undefined], // Teredo
  ] as const)('%s → %s', (address, range) => {
    expect(blockedRange(address)).toBe(range);
  });

  it.each(['0x7f.0.0.1', '010.0.0.1', '2130706433', '127.0.1'])(
    'refuses %j, which ipaddr.js alone would read as an address',
    (text) => {
      expect(() => blockedRange(text)).toThrow(TypeError);
      expect(() => createSsrfGuard({ allowHosts: [`${text}/8`] })).toThrow(ConfigError);
    },
  );
});

/** A resolver that answers from a fixed table, standing in for DNS. */
function fixedResolver(answers: Record<string, string[]>): Resolver {
  return (hostname, _options, callback) => {
    const addresses = answers[hostname];
    if (!addresses) {
      callback(
        Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }),
        [],
      );
      return;
    }
    callback(
      null,
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  };
}

function lookupAll(guard: SsrfGuard, hostname: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => {
    guard.lookup(hostname, { all: true }, (err, addresses) => {
      if (err) reject(err);
      else resolve(addresses as LookupAddress[]);
    });
  });
}

function lookupOne(guard: SsrfGuard, hostname: string): Promise<[string, number | undefined]> {
  return new Promise((resolve, reject) => {
    guard.lookup(hostname, {}, (err, address, family) => {
      if (err) reject(err);
      else resolve([address as string, family]);
    });
  });
}

describe('createSsrfGuard', () => {
  const resolver = fixedResolver({
    'public.test': ['93.184.216.34'],
    'rebind.test': ['127.0.0.1'],
    'mixed.test': ['10.0.0.5', '93.184.216.34'],
    'metadata.test': ['169.254.169.254'],
    'v6.test': ['::ffff:127.0.0.1'],
    'empty.test': [],
  });

  it('refuses blocked ranges by default with a PermanentError that says why', () => {
    const guard = createSsrfGuard({}, resolver);
    expect(guard.refusal('8.8.8.8', '8.8.8.8')).toBeUndefined();
    const reason = guard.refusal('127.0.0.1', '127.0.0.1');
    expect(reason).toBe(
      'refused to connect to 127.0.0.1: a loopback address, blocked against SSRF; allow it with allowPrivate or allowHosts',
    );
    expect(guard.refusal('hooks.example', '10.0.0.1')).toContain(
      'refused to connect to hooks.example (10.0.0.1): a private-network address',
    );
    try {
      guard.check('127.0.0.1', '127.0.0.1');
      expect.unreachable();
    } catch (err) {
      expect(isPermanentError(err)).toBe(true);
      expect((err as { code?: string }).code).toBe(destinationRefusedCode);
      expect((err as Error).message).toBe(reason);
    }
  });

  it('checks at lookup time: a name resolving to loopback is refused (DNS rebinding)', async () => {
    const guard = createSsrfGuard({}, resolver);
    await expect(lookupAll(guard, 'public.test')).resolves.toEqual([
      { address: '93.184.216.34', family: 4 },
    ]);
    await expect(lookupOne(guard, 'public.test')).resolves.toEqual(['93.184.216.34', 4]);
    await expect(lookupAll(guard, 'rebind.test')).rejects.toMatchObject({
      name: 'PermanentError',
      code: destinationRefusedCode,
      message: expect.stringContaining('rebind.test (127.0.0.1): a loopback address'),
    });
    await expect(lookupOne(guard, 'v6.test')).rejects.toMatchObject({
      message: expect.stringContaining('(::ffff:127.0.0.1): a loopback address'),
    });
  });

  it('connects a name with public and private addresses only on the public ones', async () => {
    const guard = createSsrfGuard({}, resolver);
    await expect(lookupAll(guard, 'mixed.test')).resolves.toEqual([
      { address: '93.184.216.34', family: 4 },
    ]);
    await expect(lookupOne(guard, 'mixed.test')).resolves.toEqual(['93.184.216.34', 4]);
  });

  it('passes resolver errors through and reports a name with no address as not found', async () => {
    const guard = createSsrfGuard({}, resolver);
    await expect(lookupAll(guard, 'nowhere.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(lookupAll(guard, 'empty.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('refuses localhost through the real resolver', async () => {
    const guard = createSsrfGuard();
    await expect(lookupAll(guard, 'localhost')).rejects.toMatchObject({
      code: destinationRefusedCode,
    });
  });

  it('allowPrivate opens every blocked range except the metadata addresses', async () => {
    const guard = createSsrfGuard({ allowPrivate: true }, resolver);
    for (const [address, range] of table) {
      const reason = guard.refusal(address, address.replace(/^\[|\]$/g, ''));
      if (range === 'metadata') expect(reason).toContain('cloud metadata address');
      else expect(reason).toBeUndefined();
    }
    await expect(lookupAll(guard, 'rebind.test')).resolves.toHaveLength(1);
    await expect(lookupAll(guard, 'metadata.test')).rejects.toMatchObject({
      message: expect.stringContaining('allow it explicitly with allowHosts'),
    });
  });

  it('allowHosts opens host names, wildcards, IP addresses and CIDRs', async () => {
    const guard = createSsrfGuard(
      {
        allowHosts: ['rebind.test', '*.internal.example', '10.1.0.0/16', '::1', '169.254.169.254'],
      },
      resolver,
    );
    await expect(lookupAll(guard, 'rebind.test')).resolves.toHaveLength(1);
    expect(guard.refusal('hooks.internal.example', '192.168.1.1')).toBeUndefined();
    expect(guard.refusal('internal.example', '192.168.1.1')).toBeDefined();
    expect(guard.refusal('a.test', '10.1.2.3')).toBeUndefined();
    expect(guard.refusal('a.test', '::ffff:10.1.2.3')).toBeUndefined();
    expect(guard.refusal('a.test', '10.2.0.1')).toContain('private-network');
    expect(guard.refusal('::1', '::1')).toBeUndefined();
    expect(guard.refusal('127.0.0.1', '127.0.0.1')).toContain('loopback');
    // Named explicitly, even a metadata address is let through.
    await expect(lookupAll(guard, 'metadata.test')).resolves.toHaveLength(1);
  });

  it('folds an IPv4-mapped CIDR to IPv4', () => {
    const guard = createSsrfGuard({ allowHosts: ['::ffff:127.0.0.0/104'] });
    expect(guard.refusal('127.0.0.1', '127.0.0.1')).toBeUndefined();
    expect(guard.refusal('127.0.0.1', '::ffff:127.0.0.1')).toBeUndefined();
  });

  it.each(['10.0.0.0/33', 'fd00::/129', 'not a host', 'http://x', '10.0.0.0/x'])(
    'refuses the allowHosts entry %j up front, naming it',
    (entry) => {
      expect(() => createSsrfGuard({ allowHosts: ['ok.example', entry] })).toThrow(ConfigError);
      expect(() => createSsrfGuard({ allowHosts: ['ok.example', entry] })).toThrow(
        `allowHosts.1: "${entry}" is not a host name, an IP address or a CIDR`,
      );
    },
  );
});
