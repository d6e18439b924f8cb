#!/usr/bin/env bash
# Regenerates the committed Python stubs of proto/control.proto (the internal rank control plane):
#   python/mtpserve/control/control_pb2.py, control_pb2_grpc.py
# Run it after editing the .proto and commit the result; the runtime imports the committed files
# (grpcio + protobuf only). Pinned like scripts/gen_proto.sh: the stubs refuse older runtimes.
#
#   scripts/gen_control_proto.sh [OUT_DIR]   (default: python/mtpserve/control)
#   PYTHON=...                               the interpreter with grpcio-tools (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
GRPCIO_TOOLS_VERSION=1.84.0
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${1:-python/mtpserve/control}

have=$("$PYTHON" -c 'from importlib.metadata import version; print(version("grpcio-tools"))' 2>/dev/null || true)
if [[ "$have" != "$GRPCIO_TOOLS_VERSION" ]]; then
  echo "gen_control_proto.sh: needs grpcio-tools==$GRPCIO_TOOLS_VERSION (found: ${have:-none});" \
       "pip install grpcio-tools==$GRPCIO_TOOLS_VERSION" >&2
  exit 1
fi
mkdir -p "$OUT"
"$PYTHON" -m grpc_tools.protoc -Iproto --python_out="$OUT" --grpc_python_out="$OUT" proto/control.proto
# protoc writes `import control_pb2 as ...`, which only works with OUT on sys.path.
sed -i 's/^import control_pb2 as /from . import control_pb2 as /' "$OUT/control_pb2_grpc.py"
grep -q '^from \. import control_pb2 as ' "$OUT/control_pb2_grpc.py"
echo "wrote $OUT/control_pb2.py and $OUT/control_pb2_grpc.py"
