"""TLS for the HTTP and gRPC APIs: a certificate chain and its private key (PEM files), checked
when the server starts so that a wrong file fails at once, in one line naming it."""
from __future__ import annotations

import ssl
from dataclasses import dataclass


@dataclass(frozen=True)
class TlsFiles:
    certfile: str
    keyfile: str
    cert: bytes  # the files' contents, for grpc.ssl_server_credentials
    key: bytes

    @classmethod
    def load(cls, certfile: str, keyfile: str) -> "TlsFiles":
        """Reads and checks both files; raises ValueError naming the file that is missing,
        unreadable or not PEM, or both when the key does not belong to the certificate."""
        cert = _read(certfile, "certificate", b"-----BEGIN CERTIFICATE-----")
        key = _read(keyfile, "key", b"PRIVATE KEY-----")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(certfile, keyfile, password=lambda: _refuse_encrypted(keyfile))
        except ssl.SSLError as e:
            if e.reason == "KEY_VALUES_MISMATCH":
                raise ValueError(f"the TLS key file {keyfile!r} does not belong to the certificate in "
                                 f"{certfile!r}") from None
            raise ValueError(f"cannot use the TLS certificate {certfile!r} with the key {keyfile!r}: "
                             f"{e.reason or e}") from None
        return cls(certfile, keyfile, cert, key)


def _refuse_encrypted(keyfile: str) -> bytes:
    # OpenSSL would otherwise ask for the passphrase on the terminal.
    raise ValueError(f"the TLS key file {keyfile!r} is encrypted; give an unencrypted key (mode 0600)")


def _read(path: str, what: str, marker: bytes) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"cannot read the TLS {what} file {path!r}: {e.strerror or e}") from None
    if marker not in data:
        raise ValueError(f"the TLS {what} file {path!r} is not PEM (no {marker.decode().strip('-')!r} block)")
    return data
