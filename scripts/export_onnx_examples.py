"""Write the ONNX files that the comparisons use for models outside the zoo and the bank (out/onnx/ by
default): exported here with torch.onnx from architectures defined in tests/onnx_nets.py, with a dynamic
batch dim as exporters usually write it.

    python scripts/export_onnx_examples.py [--out out/onnx]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.onnx_nets import encoder, export_onnx  # noqa: E402

EXAMPLES = {
    # a post-norm transformer encoder, d=384, 6 heads, sequence 96 (the encoder of issue 14), 4 layers
    "onnx_encoder_d384": lambda: encoder(d=384, heads=6, ff=1536, layers=4, seq=96),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="out/onnx")
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for name, build in EXAMPLES.items():
        path = Path(args.out) / f"{name}.onnx"
        export_onnx(*build(), str(path), dynamic={"x0": {0: "batch"}})
        print(path)


if __name__ == "__main__":
    main()
