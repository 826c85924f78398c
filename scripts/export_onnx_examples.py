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

import torch  # noqa: E402
from torch import nn  # noqa: E402

from tests.onnx_nets import AudioNet, Mixer, Recurrent, UNet, encoder, export_onnx  # noqa: E402

EXAMPLES = {
    # a post-norm transformer encoder, d=384, 6 heads, sequence 96 (the encoder of issue 14), 4 layers
    "onnx_encoder_d384": lambda: encoder(d=384, heads=6, ff=1536, layers=4, seq=96),
    # architectures with operators no zoo model has (recommender/frontend/onnx_rewrite.py, recommender/frontend/canonical_ops.py)
    "onnx_audio_conv1d": lambda: _seeded((1, 1, 16000), AudioNet),  # conv1d over a 1 s waveform at 16 kHz
    "onnx_lstm_2x256": lambda: _seeded((1, 100, 80), Recurrent, nn.LSTM, features=80, hidden=256, num_layers=2),
    "onnx_unet_32": lambda: _seeded((1, 3, 128, 128), UNet, 32),  # transposed convs, skip concatenations
    "onnx_mixer_s16": lambda: _seeded((1, 3, 128, 128), Mixer),  # token-mixing matmuls on transposes
}


def _seeded(shape: tuple, build: type, *args: object, **kw: object) -> tuple[nn.Module, tuple]:
    """The model built under a fixed seed (the files do not depend on what ran before) and an input."""
    torch.manual_seed(0)
    return build(*args, **kw).eval(), (torch.randn(*shape),)


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
