#!/usr/bin/env bash
# Regenerates the committed Python stubs of a proto in proto/:
#   mtpserve  proto/mtpserve.proto (public API)      -> python/mtpserve/grpc_api/mtpserve_pb2{,_grpc}.py
#   control   proto/control.proto  (rank control plane) -> python/mtpserve/control/control_pb2{,_grpc}.py
# Run it after editing a .proto and commit the result (the runtime imports the committed files, so
# grpcio-tools is needed only here).
#
# The stubs record the grpcio-tools version that made them and refuse to import under an older
# grpcio, so they are generated with a pinned grpcio-tools: the one the GPU image's grpcio
# matches. tests/test_grpc_api.py and tests/test_control_plane.py check the committed files.
#
#   scripts/gen_proto.sh                 both protos, into their package folders
#   scripts/gen_proto.sh NAME [OUT_DIR]  one proto (mtpserve or control), optionally elsewhere
#   PYTHON=...                           the interpreter with grpcio-tools (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
GRPCIO_TOOLS_VERSION=1.84.0
PYTHON=${PYTHON:-.venv/bin/python}
declare -A PACKAGE=([mtpserve]=python/mtpserve/grpc_api [control]=python/mtpserve/control)

have=$("$PYTHON" -c 'from importlib.metadata import version; print(version("grpcio-tools"))' 2>/dev/null || true)
if [[ "$have" != "$GRPCIO_TOOLS_VERSION" ]]; then
  echo "gen_proto.sh: needs grpcio-tools==$GRPCIO_TOOLS_VERSION (found: ${have:-none});" \
       "pip install grpcio-tools==$GRPCIO_TOOLS_VERSION" >&2
  exit 1
fi

generate() {
  local name=$1 out=$2
  mkdir -p "$out"
  "$PYTHON" -m grpc_tools.protoc -Iproto --python_out="$out" --grpc_python_out="$out" "proto/$name.proto"
  # protoc writes `import NAME_pb2 as ...`, which only works with OUT on sys.path.
  sed -i "s/^import ${name}_pb2 as /from . import ${name}_pb2 as /" "$out/${name}_pb2_grpc.py"
  grep -q "^from \. import ${name}_pb2 as " "$out/${name}_pb2_grpc.py"
  echo "wrote $out/${name}_pb2.py and $out/${name}_pb2_grpc.py"
}

if [[ $# -eq 0 ]]; then
  for name in "${!PACKAGE[@]}"; do generate "$name" "${PACKAGE[$name]}"; done
else
  [[ -n "${PACKAGE[$1]:-}" ]] || { echo "gen_proto.sh: unknown proto '$1' (mtpserve or control)" >&2; exit 2; }
  generate "$1" "${2:-${PACKAGE[$1]}}"
fi
