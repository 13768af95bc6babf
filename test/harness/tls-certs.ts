import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A key and its certificate, in PEM. */
export interface KeyPair {
  key: string;
  cert: string;
}

/** What {@link makeTestCerts} writes: a private CA and leaves for 127.0.0.1 in every state tests need. */
export interface TestCerts {
  ca: KeyPair;
  /** Signed by the CA, for IP 127.0.0.1 and localhost, valid now. */
  good: KeyPair;
  /** Signed by the CA, valid now, for another name only. */
  wrongName: KeyPair;
  /** Signed by the CA, for 127.0.0.1, expired in 2020. */
  expired: KeyPair;
  /** Self-signed, for 127.0.0.1. */
  selfSigned: KeyPair;
}

/**
 * Generates the certificates with `openssl` into a temp dir (removed
 * afterwards): nothing checked in, nothing that expires under the suite.
 */
export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'requeue-tls-'));
  const at = (f: string) => join(dir, f);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const read = (name: string): KeyPair => ({
    key: readFileSync(at(`${name}.key`), 'utf8'),
    cert: readFileSync(at(`${name}.pem`), 'utf8'),
  });
  try {
    // A self-signed certificate (the CA, and a leaf no CA vouches for), valid 2 days.
    const selfSigned = (name: string, cn: string, ...ext: string[]) =>
      ssl(
        ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2'],
        ...['-keyout', `${name}.key`, '-out', `${name}.pem`, '-subj', `/CN=${cn}`],
        ...ext.flatMap((e) => ['-addext', e]),
      );
    selfSigned(
      'ca',
      'requeue test CA',
      'basicConstraints=critical,CA:TRUE',
      'keyUsage=critical,keyCertSign',
    );
    selfSigned('selfSigned', '127.0.0.1', 'subjectAltName=IP:127.0.0.1');
    const leaf = (name: string, san: string, dates: string[]) => {
      ssl(
        'req',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        `${name}.key`,
        '-out',
        `${name}.csr`,
        '-subj',
        `/CN=${name}`,
      );
      writeFileSync(at(`${name}.ext`), `subjectAltName=${san}\n`);
      writeFileSync(at('ca.cnf'), caConfig(dir));
      writeFileSync(at('index.txt'), '');
      ssl(
        'ca',
        '-batch',
        '-config',
        'ca.cnf',
        '-in',
        `${name}.csr`,
        '-out',
        `${name}.pem`,
        '-extfile',
        `${name}.ext`,
        '-notext',
        ...dates,
      );
    };
    const now = Date.now();
    const stamp = (ms: number) =>
      new Date(ms).toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';
    const valid = ['-startdate', stamp(now - 3_600_000), '-enddate', stamp(now + 2 * 86_400_000)];
    leaf('good', 'IP:127.0.0.1,DNS:localhost', valid);
    leaf('wrongName', 'DNS:wrong.example', valid);
    leaf('expired', 'IP:127.0.0.1', [
      '-startdate',
      '20200101000000Z',
      '-enddate',
      '20200102000000Z',
    ]);
    return {
      ca: read('ca'),
      good: read('good'),
      wrongName: read('wrongName'),
      expired: read('expired'),
      selfSigned: read('selfSigned'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function caConfig(dir: string): string {
  return `[ ca ]
default_ca = test_ca
[ test_ca ]
dir = ${dir}
database = ${dir}/index.txt
new_certs_dir = ${dir}
certificate = ${dir}/ca.pem
private_key = ${dir}/ca.key
rand_serial = yes
default_md = sha256
policy = any
unique_subject = no
[ any ]
commonName = supplied
`;
}
