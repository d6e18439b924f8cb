"""Fetches what the NPU host code is compiled and checked against, from the torch_npu wheel that matches our
torch (downloaded with pip, never imported, no CANN needed), into .torch_npu/ at the repository root:
  include/             torch_npu's C++ headers and the ACL headers (acl/acl.h, acl_rt.h) it ships
  _op_plugin_docs.py   every torch_npu op's signature and documented contract
  schemas.txt          the schemas libtorch_npu.so registers under npu::, one per line
  torch_npu.whl        the wheel itself (a test imports it where CANN is missing)
Run by scripts/setup.sh; tests/test_npu_host_path.py uses the result and skips where it is missing."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "2.13.0"
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".torch_npu"
# A registered schema in the library's strings: name(args) -> returns.
SCHEMA = re.compile(rb"(?<![\w.])(npu_\w+(?:\.\w+)?\((?:Tensor|int|float|bool|str|SymInt)[ -~]*?\) -> [ -~]+)")


def main() -> int:
    if (OUT / "torch_npu.whl").exists():
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"torch_npu=={VERSION}",
                        "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("torch_npu-*.whl"))
        staging = Path(tmp) / "out"
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith("torch_npu/include/") or name == "torch_npu/_op_plugin_docs.py":
                    z.extract(name, staging)
            library = z.read("torch_npu/lib/libtorch_npu.so")
        schemas = sorted({m.decode() for m in SCHEMA.findall(library)})
        (staging / "torch_npu" / "schemas.txt").write_text("\n".join(schemas) + "\n")
        shutil.copy(wheel, staging / "torch_npu" / "torch_npu.whl")
        shutil.rmtree(OUT, ignore_errors=True)
        shutil.move(str(staging / "torch_npu"), OUT)
    print(f"torch_npu {VERSION}: headers, op docs and {len(schemas)} schemas in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
