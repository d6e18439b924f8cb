#!/usr/bin/env bash
# Creates .venv with the CPU torch wheel and builds mtpserve (C++ extension included) against it.
# The extension is built without build isolation so it links the torch installed here.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q "scikit-build-core>=0.10" "pybind11>=2.12" cmake ninja
.venv/bin/pip install -q --no-build-isolation -e ".[test]"
# The torch_npu wheel's headers and op schemas, which the NPU host code is compiled and checked against.
.venv/bin/python scripts/fetch_torch_npu_headers.py
