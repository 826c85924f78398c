"""torchvision architectures outside the zoo, as a user exports them: what schedrec hands back, against ONNX
Runtime and PyTorch.

Each model (random weights, eval mode) is exported with torch.onnx's TorchScript exporter (dynamic batch dim),
transferred with the shipped default (`budgeted_transfer`, k=2 from the bank of this CPU or the nearest one,
ranked by its lgbm, a short search for heavy kernels without donors or a rule), then timed side by side with
ONNX Runtime on the same file and PyTorch eager on the module, as `unseen_onnx.py` times its own
architectures (`time_side_by_side`).

    python benchmarks/torchvision_onnx.py [--models mobilenet_v3_large,swin_t,...] [--redo]
writes benchmarks/results/<target-key>/torchvision_onnx.json and .md (resumable: models already there are
skipped unless --redo). torchvision is not a dependency of schedrec: install the build that matches torch.
Keep the machine otherwise idle while it runs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.errors import SchedrecError, run_script  # noqa: E402

# name -> (builder in torchvision.models, input shape)
MODELS = {
    "mobilenet_v3_large": ("mobilenet_v3_large", (1, 3, 224, 224)),
    "swin_t": ("swin_t", (1, 3, 224, 224)),
    "efficientnet_v2_s": ("efficientnet_v2_s", (1, 3, 224, 224)),
    "resnext50_32x4d": ("resnext50_32x4d", (1, 3, 224, 224)),
    "shufflenet_v2_x1_0": ("shufflenet_v2_x1_0", (1, 3, 224, 224)),
    "r3d_18": ("video.r3d_18", (1, 3, 8, 112, 112)),
    "lraspp_mobilenet_v3_large": ("segmentation.lraspp_mobilenet_v3_large", (1, 3, 256, 256)),
    "inception_v3": ("inception_v3", (1, 3, 299, 299)),
}
KWARGS = {"inception_v3": dict(init_weights=False, aux_logits=False),
          "lraspp_mobilenet_v3_large": dict(weights_backbone=None)}


def build(name: str):
    """(module returning one tensor, example inputs) for a torchvision model under seed 0."""
    path, shape = MODELS[name]
    factory = _torchvision().models
    for part in path.split("."):
        factory = getattr(factory, part)
    torch.manual_seed(0)
    return Tensor0(factory(**KWARGS.get(name, {})).eval()).eval(), (torch.randn(*shape),)


def _torchvision():
    try:
        import torchvision
    except ImportError as err:
        raise SchedrecError("torchvision is not installed: install the build that matches this torch") from err
    return torchvision


class Tensor0(torch.nn.Module):
    """The model's one tensor output (a segmentation model returns a dict)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.model(x)
        return y["out"] if isinstance(y, dict) else y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--k", type=int, default=2, help="candidates measured per kernel (2, as make demo)")
    ap.add_argument("--redo", action="store_true", help="transfer afresh and time again the models already there")
    args = ap.parse_args()
    from unseen_onnx import run_transfers

    def export(name: str, work: Path) -> tuple[str, object, tuple, dict]:
        model, inputs = build(name)
        spec = str(work / f"{name}.onnx")
        with torch.no_grad():
            torch.onnx.export(model, inputs, spec, dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        return spec, model, inputs, {"input": list(MODELS[name][1])}
    run_transfers("torchvision_onnx", args.models, list(MODELS), args.k, args.redo, export, markdown,
                  {"torch": torch.__version__, "torchvision": _torchvision().__version__})


def markdown(results: dict) -> str:
    def ratio(a, b):
        return f"{a / b:.2f}" if a and b else "-"
    lines = [f"# torchvision models exported to ONNX ({results['target_key']}, {results['cpu']})", "",
             f"`{results['command']}` (torch {results['torch']}, torchvision {results['torchvision']}). Random weights, "
             f"exported with a dynamic batch dim, transferred from `{results['bank']}` with {results['selector']} (top 2 "
             f"per kernel measured), then schedrec's build, ONNX Runtime on the same file and PyTorch eager timed side "
             f"by side, {results['threads']} threads each, target `{results['target']}`. FLOPs transferred: from bank "
             f"donors; scheduled: by any chosen schedule (donor, rule, search)."
             + (f" {results['note']}" if results.get("note") else ""), "",
             "| model | input | kernels | FLOPs transferred | FLOPs scheduled | plain loops (time) | search s | schedrec ms "
             "| ONNX Runtime ms | PyTorch ms | schedrec / ORT | schedrec / PyTorch |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results["models"].items():
        lines.append(f"| {name} | {'x'.join(map(str, r['input']))} | {r['kernels']} | "
                     f"{r['flop_coverage_transferred']:.1%} | {r['flop_coverage_chosen']:.1%} | "
                     f"{r['time_share_default']:.1%} | {r['search_s']:.0f} | {r.get('schedrec_ms', '-')} | "
                     f"{r.get('onnxruntime_ms', '-')} | {r.get('pytorch_ms', '-')} | "
                     f"{ratio(r.get('schedrec_ms'), r.get('onnxruntime_ms'))} | "
                     f"{ratio(r.get('schedrec_ms'), r.get('pytorch_ms'))} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    run_script(main)
