#!/usr/bin/env bash
# Regenerates the committed Python stubs of proto/mtpserve.proto:
#   python/mtpserve/grpc_api/mtpserve_pb2.py, mtpserve_pb2_grpc.py
# Run it after editing the .proto and commit the result (the server and clients import the
# committed files, so grpcio-tools is needed only here).
#
# The stubs record the grpcio-tools version that made them and refuse to import under an older
# grpcio, so they are generated with a pinned grpcio-tools: the one the GPU image's grpcio
# matches. tests/test_grpc_api.py checks that the committed files are what this script writes.
#
#   scripts/gen_proto.sh [OUT_DIR]   (default: python/mtpserve/grpc_api)
#   PYTHON=...                       the interpreter with grpcio-tools (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
GRPCIO_TOOLS_VERSION=1.84.0
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${1:-python/mtpserve/grpc_api}

have=$("$PYTHON" -c 'from importlib.metadata import version; print(version("grpcio-tools"))' 2>/dev/null || true)
if [[ "$have" != "$GRPCIO_TOOLS_VERSION" ]]; then
  echo "gen_proto.sh: needs grpcio-tools==$GRPCIO_TOOLS_VERSION (found: ${have:-none});" \
       "pip install grpcio-tools==$GRPCIO_TOOLS_VERSION" >&2
  exit 1
fi
mkdir -p "$OUT"
"$PYTHON" -m grpc_tools.protoc -Iproto --python_out="$OUT" --grpc_python_out="$OUT" proto/mtpserve.proto
# protoc writes `import mtpserve_pb2 as ...`, which only works with OUT on sys.path.
sed -i 's/^import mtpserve_pb2 as /from . import mtpserve_pb2 as /' "$OUT/mtpserve_pb2_grpc.py"
grep -q '^from \. import mtpserve_pb2 as ' "$OUT/mtpserve_pb2_grpc.py"
echo "wrote $OUT/mtpserve_pb2.py and $OUT/mtpserve_pb2_grpc.py"
