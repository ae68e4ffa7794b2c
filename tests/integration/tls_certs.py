"""Test certificates made with the openssl command line (issue 17): a CA, and
server or client certificates it signs, as PEM files in a directory the test
owns. Nothing here is trusted by the system: each test names its CA where it
should be trusted."""

import os
import subprocess


def _openssl(*args, cwd):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed (exit %d): %s" % (args[0], r.returncode, r.stderr))
    return r.stdout


class Cert:
    """A certificate and its key: `cert` and `key` are paths of PEM files."""

    def __init__(self, cert, key):
        self.cert = cert
        self.key = key


class CA(Cert):
    """A self-signed CA (RSA 2048, valid 2 days) in `directory`, files
    <name>.crt and <name>.key."""

    def __init__(self, directory, name="test-ca"):
        self.dir = directory
        self.name = name
        cert = os.path.join(directory, name + ".crt")
        key = os.path.join(directory, name + ".key")
        ext = os.path.join(directory, name + ".ext")
        with open(ext, "w") as f:
            f.write("[v3_ca]\n"
                    "basicConstraints = critical, CA:TRUE\n"
                    "keyUsage = critical, keyCertSign, cRLSign\n"
                    "subjectKeyIdentifier = hash\n")
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                 "-days", "2", "-subj", "/CN=%s" % name, "-config", ext, "-extensions", "v3_ca",
                 cwd=directory)
        os.chmod(key, 0o600)
        super().__init__(cert, key)
        self._serial = 0

    def issue(self, name, dns=(), ips=(), client=False):
        """A certificate for `name` (its CN) signed by this CA, with the DNS
        names and IP addresses given as subjectAltName (a server certificate,
        or a client certificate with client=True). Files <name>.crt/.key."""
        self._serial += 1
        cert = os.path.join(self.dir, name + ".crt")
        key = os.path.join(self.dir, name + ".key")
        csr = os.path.join(self.dir, name + ".csr")
        ext = os.path.join(self.dir, name + ".ext")
        sans = ["DNS:%s" % d for d in dns] + ["IP:%s" % i for i in ips]
        with open(ext, "w") as f:
            f.write("basicConstraints = critical, CA:FALSE\n"
                    "keyUsage = critical, digitalSignature, keyEncipherment\n"
                    "extendedKeyUsage = %s\n"
                    "authorityKeyIdentifier = keyid\n"
                    "subjectKeyIdentifier = hash\n" % ("clientAuth" if client else "serverAuth"))
            if sans:
                f.write("subjectAltName = %s\n" % ", ".join(sans))
        _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                 "-subj", "/CN=%s" % name, cwd=self.dir)
        _openssl("x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key,
                 "-set_serial", str(1000 + self._serial), "-days", "2", "-extfile", ext,
                 "-out", cert, cwd=self.dir)
        os.chmod(key, 0o600)
        return Cert(cert, key)
