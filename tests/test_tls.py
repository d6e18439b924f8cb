"""TLS for `mtpserve serve` (--ssl_certfile / --ssl_keyfile), with a self-signed certificate made
here: HTTPS with the official openai client, a TLS gRPC API, and one-line errors for bad files."""
import datetime
import ipaddress
import socket
import ssl
import time

import grpc
import httpx
import openai
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from servers import start_serve

from mtpserve.cli import main as cli_main
from mtpserve.grpc_api import mtpserve_pb2 as pb
from mtpserve.grpc_api import mtpserve_pb2_grpc as pb_grpc


def write_self_signed(directory, name="cert"):
    """A self-signed certificate for 127.0.0.1 and localhost, and its key: (cert path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_healthy_over_tls(url, ca, proc, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    with httpx.Client(verify=ssl.create_default_context(cafile=str(ca)), timeout=5) as client:
        while True:
            try:
                if client.get(url + "/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the TLS server did not come up"
            time.sleep(0.2)


def test_https_and_grpc_over_tls(tmp_path, tiny_model_dir):
    cert, key = write_self_signed(tmp_path)
    port, grpc_port = free_port(), free_port()
    proc = start_serve("--model", str(tiny_model_dir), "--dtype=float32", "--block_size=8", "--max_cache_blocks=64",
                       f"--port={port}", f"--grpc_port={grpc_port}", f"--ssl_certfile={cert}", f"--ssl_keyfile={key}")
    url = f"https://127.0.0.1:{port}"
    try:
        wait_until_healthy_over_tls(url, cert, proc)
        trusting = httpx.Client(verify=ssl.create_default_context(cafile=str(cert)))
        with openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60,
                           http_client=trusting) as oai:
            out = oai.completions.create(model=tiny_model_dir.name, prompt="hello", max_tokens=4)
            assert out.usage.completion_tokens == 4
        with pytest.raises(httpx.HTTPError):  # plain HTTP to the TLS port
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=30)
        with pytest.raises(httpx.ConnectError):  # TLS, but the certificate is not trusted
            httpx.get(url + "/health", timeout=30)

        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(f"127.0.0.1:{grpc_port}", credentials) as channel:
            request = pb.GenerateRequest(text="hello", sampling_params=pb.SamplingParams(temperature=0, max_tokens=4,
                                                                                         ignore_eos=True))
            responses = list(pb_grpc.GenerationStub(channel).Generate(request, timeout=60))
            assert sum(len(r.token_ids) for r in responses) == 4
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:  # no TLS: no answer
            with pytest.raises(grpc.RpcError) as refused:
                pb_grpc.GenerationStub(channel).Models(pb.ModelsRequest(), timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        proc.terminate()
        proc.wait(60)


def _mismatched(tmp_path):
    cert, _ = write_self_signed(tmp_path, "one")
    _, other_key = write_self_signed(tmp_path, "two")
    return cert, other_key, ["does not belong to the certificate", str(other_key)]


def _missing(tmp_path):
    cert, _ = write_self_signed(tmp_path)
    return cert, tmp_path / "missing.key", ["cannot read the TLS key file", "missing.key"]


def _not_pem(tmp_path):
    _, key = write_self_signed(tmp_path)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    return garbage, key, ["TLS certificate file", "garbage.pem", "is not PEM"]


def _unreadable(tmp_path):
    cert, key = write_self_signed(tmp_path)
    return tmp_path, key, ["cannot read the TLS certificate file", str(tmp_path)]  # a directory


@pytest.mark.parametrize("files", [_mismatched, _missing, _not_pem, _unreadable])
def test_bad_tls_files_exit_with_one_line_naming_the_file(tmp_path, capsys, files):
    cert, key, expected = files(tmp_path)
    # A model directory that does not exist: the TLS files must be refused before it is looked at.
    code = cli_main(["serve", "--model", str(tmp_path / "no-model"), f"--ssl_certfile={cert}",
                     f"--ssl_keyfile={key}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("mtpserve: error: "), err
    for part in expected:
        assert part in err, err


def test_tls_needs_both_files(tmp_path, capsys):
    cert, _ = write_self_signed(tmp_path)
    assert cli_main(["serve", f"--ssl_certfile={cert}"]) == 2
    assert "needs both --ssl_certfile and --ssl_keyfile" in capsys.readouterr().err
