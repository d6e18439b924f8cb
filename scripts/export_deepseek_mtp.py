#!/usr/bin/env python3
"""Exports a DeepSeek-V3 checkpoint's MTP layer as a standalone --draft_model directory.

    python scripts/export_deepseek_mtp.py --input-dir DIR --output-dir DIR [--force]

Same as `mtpserve export-mtp`; see mtpserve.export_mtp.
"""
import sys

from mtpserve.cli import main

if __name__ == "__main__":
    sys.exit(main(["export-mtp", *sys.argv[1:]]))
